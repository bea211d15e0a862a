//! The Prometheus text format's one rule the metrics writers share: how a
//! label value is escaped. The metrics endpoint (`admin`) and the
//! certificates' families (`certificates`) both write labels.

/// A Prometheus label value: backslash, double quote and newline escaped
/// (an app's name is the plugin's to choose).
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::label;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("plain"), "plain");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
