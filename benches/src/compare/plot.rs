//! SVG plots of the matrix: for each path and mode, req/s against
//! concurrency and p99 latency against concurrency, one line per server.
//! External peers are drawn in the panels of the first Stoa path.

use super::Point;
use crate::load::Mode;
use plotters::prelude::*;
use std::path::Path;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One line: a server's (concurrency, value) pairs.
type Series = (String, Vec<(f64, f64)>);

/// Height of one row of panels, and the label font, in pixels: the file
/// is read at this size (a browser, a markdown viewer).
const ROW_HEIGHT: u32 = 360;
const LABEL_FONT: u32 = 16;
/// The y axis's label area and the x axis's, and the chart margin.
const Y_LABEL_AREA: u32 = 70;
const X_LABEL_AREA: u32 = 40;
const MARGIN: u32 = 12;
const CAPTION_FONT: u32 = 19;
/// The least room between two labels of a logarithmic axis (a font's
/// size is about 0.8 of it in pixels: a label's height and as much again).
const MIN_LABEL_GAP: f64 = 2.0 * LABEL_FONT as f64;
/// Width of one entry of the shared legend.
const LEGEND_ENTRY: i32 = 190;
const WIDTH: u32 = 1200;

/// Writes the plot; an empty matrix gives an SVG that says so. At the top,
/// a title naming the worker mode(s) and one legend for every panel (a
/// server has one colour throughout).
pub fn svg(points: &[Point], file: &Path) -> Result<(), String> {
    let sweep: Vec<&Point> = points.iter().filter(|p| p.idle.is_none()).collect();
    let panels = panels(&sweep);
    let labels = labels(&sweep);
    let rows = panels.len().max(1);
    let per_line = ((WIDTH as i32 - 40) / LEGEND_ENTRY).max(1) as usize;
    let legend_lines = labels.len().div_ceil(per_line).max(1);
    let header = 44 + 22 * legend_lines as u32;
    let root =
        SVGBackend::new(file, (WIDTH, header + ROW_HEIGHT * rows as u32)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("plot {}: {e}", file.display());
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(header);
    top.draw_text(
        &title(points),
        &("sans-serif", 22).into_text_style(&top),
        (20, 12),
    )
    .map_err(err)?;
    for (i, label) in labels.iter().enumerate() {
        let x = 20 + (i % per_line) as i32 * LEGEND_ENTRY;
        let y = 44 + (i / per_line) as i32 * 22;
        let color = COLORS[i % COLORS.len()];
        top.draw(&PathElement::new(
            [(x, y), (x + 24, y)],
            color.stroke_width(3),
        ))
        .map_err(err)?;
        top.draw_text(
            label,
            &("sans-serif", LABEL_FONT).into_text_style(&top),
            (x + 30, y - 7),
        )
        .map_err(err)?;
    }
    if panels.is_empty() {
        body.draw_text(
            "no data",
            &("sans-serif", 20).into_text_style(&body),
            (20, 20),
        )
        .map_err(err)?;
    }
    let areas = body.split_evenly((rows, 2));
    for (row, (path, mode)) in panels.iter().enumerate() {
        let rps = series(&sweep, path, *mode, |p| {
            p.median().map(|r| r.report.req_per_sec())
        });
        let p99 = series(&sweep, path, *mode, |p| {
            p.median().map(|r| r.report.percentile_ms(99.0).max(0.001))
        });
        let title = format!("{path} {}", mode.name());
        draw(
            &areas[row * 2],
            &format!("{title}: req/s (median)"),
            "req/s",
            &with_colors(rps, &labels),
            false,
        )
        .map_err(err)?;
        draw(
            &areas[row * 2 + 1],
            &format!("{title}: p99 latency"),
            "p99 ms",
            &with_colors(p99, &labels),
            true,
        )
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// The figure's title: what ran, and in which worker mode(s).
fn title(points: &[Point]) -> String {
    let mut modes: Vec<&str> = Vec::new();
    for p in points.iter().filter(|p| is_stoa(&p.server)) {
        let m = p.worker_mode_name();
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    match modes.as_slice() {
        [] => "stoa-bench compare".to_string(),
        [one] => format!("stoa-bench compare: stoa in worker mode {one}"),
        many => format!(
            "stoa-bench compare: stoa in worker modes {}",
            many.join(", ")
        ),
    }
}

/// Every line's label, in first-seen order: its place is its colour.
fn labels(sweep: &[&Point]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in sweep {
        let label = p.label();
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
}

/// A panel's series with the colour of each one's label.
fn with_colors(lines: Vec<Series>, labels: &[String]) -> Vec<(RGBColor, Series)> {
    lines
        .into_iter()
        .map(|line| {
            let i = labels.iter().position(|l| *l == line.0).unwrap_or(0);
            (COLORS[i % COLORS.len()], line)
        })
        .collect()
}

/// The (path, mode) panels, in first-seen order, Stoa paths only.
fn panels(sweep: &[&Point]) -> Vec<(String, Mode)> {
    let mut out: Vec<(String, Mode)> = Vec::new();
    for p in sweep.iter().filter(|p| is_stoa(&p.server)) {
        if !out
            .iter()
            .any(|(path, mode)| *path == p.path && *mode == p.mode)
        {
            out.push((p.path.clone(), p.mode));
        }
    }
    if out.is_empty() {
        // Peers only: one panel per peer path and mode.
        for p in sweep {
            if !out
                .iter()
                .any(|(path, mode)| *path == p.path && *mode == p.mode)
            {
                out.push((p.path.clone(), p.mode));
            }
        }
    }
    out
}

fn is_stoa(server: &str) -> bool {
    matches!(
        server,
        "select" | "poll" | "epoll" | "io_uring" | "io_uring-completion" | "auto"
    )
}

/// The lines of one panel: Stoa servers on this path, and (in the first
/// path's panels) the peers.
fn series(
    sweep: &[&Point],
    path: &str,
    mode: Mode,
    value: impl Fn(&Point) -> Option<f64>,
) -> Vec<Series> {
    let first_path = sweep
        .iter()
        .find(|p| is_stoa(&p.server))
        .map(|p| p.path.as_str());
    let mut out: Vec<Series> = Vec::new();
    for p in sweep.iter().filter(|p| p.mode == mode) {
        let here = p.path == path || (!is_stoa(&p.server) && first_path.is_none_or(|f| f == path));
        let Some(v) = value(p).filter(|_| here) else {
            continue;
        };
        let xy = (p.concurrency as f64, v);
        let name = p.label();
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push(xy),
            None => out.push((name, vec![xy])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Draws the mesh and one line with its points per series: the same for a
/// linear and a logarithmic y axis, whose chart types differ.
macro_rules! draw_lines {
    ($c:expr, $y_desc:expr, $lines:expr) => {{
        let c = &mut $c;
        let (y_desc, lines) = ($y_desc, $lines);
        c.configure_mesh()
            .x_desc("connections")
            .y_desc(y_desc)
            .label_style(("sans-serif", LABEL_FONT))
            .axis_desc_style(("sans-serif", LABEL_FONT))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format_value(*v))
            .draw()?;
        for (color, (_, pts)) in lines.iter() {
            let color = *color;
            c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
            c.draw_series(pts.iter().map(|&xy| Circle::new(xy, 3, color.filled())))?;
        }
    }};
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    lines: &[(RGBColor, Series)],
    log_y: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|(_, (_, p))| p.iter().map(|v| v.0))
        .collect();
    let ys = lines.iter().flat_map(|(_, (_, p))| p.iter().map(|v| v.1));
    let (x_min, x_max) = bounds(xs.iter().copied(), 1.0);
    let (y_min, y_max) = bounds(ys, 1.0);
    let x_range = (x_min / 1.5).max(0.5)..x_max * 1.5;
    // The x labels: the concurrency levels measured, nothing between.
    let mut x_ticks: Vec<f64> = xs.into_iter().filter(|x| *x > 0.0).collect();
    x_ticks.sort_by(f64::total_cmp);
    x_ticks.dedup();
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(title, ("sans-serif", CAPTION_FONT))
        .margin(MARGIN)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(Y_LABEL_AREA);
    let x = x_range.log_scale().with_key_points(x_ticks);
    if log_y {
        let height =
            area.dim_in_pixel().1 as f64 - f64::from(2 * MARGIN + X_LABEL_AREA + CAPTION_FONT + 8);
        let (lo, hi, ticks) = log_ticks(y_min, y_max, height);
        let mut c = chart.build_cartesian_2d(x, (lo..hi).log_scale().with_key_points(ticks))?;
        draw_lines!(c, y_desc, lines);
    } else {
        let mut c = chart.build_cartesian_2d(x, 0.0..y_max * 1.15)?;
        draw_lines!(c, y_desc, lines);
    }
    Ok(())
}

/// A logarithmic axis for values in `lo..=hi` drawn `height` pixels tall:
/// its bounds, each a label (so the lowest and highest points lie between
/// two labels), and labels at 1-2-5 steps, or at powers of ten (then every
/// second, third...) when 1-2-5 steps would come closer than
/// `MIN_LABEL_GAP`.
pub(super) fn log_ticks(lo: f64, hi: f64, height: f64) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = (lo.max(1e-6), hi.max(lo.max(1e-6)));
    let nice = |steps: &[f64], every: i32| -> Vec<f64> {
        let (first, last) = (lo.log10().floor() as i32 - 1, hi.log10().ceil() as i32 + 1);
        (first..=last)
            .filter(|e| e.rem_euclid(every) == 0)
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .collect()
    };
    let snap = |all: Vec<f64>| -> (f64, f64, Vec<f64>) {
        let below = all
            .iter()
            .rposition(|&t| t <= lo * (1.0 + 1e-9))
            .unwrap_or(0);
        let mut above = all
            .iter()
            .position(|&t| t >= hi * (1.0 - 1e-9))
            .unwrap_or(all.len() - 1);
        if above <= below {
            above = (below + 1).min(all.len() - 1);
        }
        (all[below], all[above], all[below..=above].to_vec())
    };
    let gap = |(lo, hi, ticks): &(f64, f64, Vec<f64>)| {
        let per_decade = height / (hi / lo).log10();
        ticks
            .windows(2)
            .map(|w| (w[1] / w[0]).log10() * per_decade)
            .fold(f64::INFINITY, f64::min)
    };
    let fine = snap(nice(&[1.0, 2.0, 5.0], 1));
    if gap(&fine) >= MIN_LABEL_GAP {
        return fine;
    }
    let mut every = 1;
    loop {
        let coarse = snap(nice(&[1.0], every));
        if gap(&coarse) >= MIN_LABEL_GAP || every >= 6 {
            return coarse;
        }
        every += 1;
    }
}

/// Axis labels: integers for large values, a few decimals for small
/// ones, without trailing zeros (`20`, `0.5`).
fn format_value(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        return format!("{v:.0}");
    }
    let text = if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Min and max of positive values, `fallback` for both if there are none.
fn bounds(values: impl Iterator<Item = f64>, fallback: f64) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi > 0.0 {
        (lo, hi)
    } else {
        (fallback, fallback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Run;
    use crate::load::Report;
    use std::time::Duration;

    /// A point of the sweep whose one run has this p99 (all its latencies).
    fn point(server: &str, mode: Mode, concurrency: usize, p99_ms: f64) -> Point {
        let mut report = Report::empty(100);
        report.completed = 100;
        report.elapsed = Duration::from_secs(1);
        for _ in 0..100 {
            report
                .latency_us
                .record((p99_ms * 1000.0) as u64)
                .expect("in range");
        }
        Point {
            server: server.into(),
            worker_mode: Some("thread".into()),
            path: "/hello/".into(),
            mode,
            concurrency,
            idle: None,
            requests: 100,
            runs_wanted: 1,
            runs: vec![Run { report, cpu: None }],
            peak_rss_kib: None,
            rss_before_kib: None,
            rss_idle_kib: None,
            note: None,
            skipped: false,
        }
    }

    /// The p99 of a `--quick` run on a loaded machine: from tens of
    /// milliseconds to over a second in one panel.
    fn quick_like() -> Vec<Point> {
        let mut points = Vec::new();
        let lows = [27.0, 29.0, 115.0, 48.0];
        let highs = [350.0, 320.0, 720.0, 1460.0];
        for (i, server) in ["select", "poll", "epoll", "io_uring"].iter().enumerate() {
            for mode in [Mode::KeepAlive, Mode::Close, Mode::Pipelined(16)] {
                points.push(point(server, mode, 1, lows[i]));
                points.push(point(server, mode, 50, highs[i]));
            }
        }
        points
    }

    /// `(x, y, text)` of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<(f64, f64, String)> {
        let attr = |tag: &str, name: &str| -> Option<f64> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            tag[at..].split('"').next()?.parse().ok()
        };
        svg.split("<text")
            .skip(1)
            .filter_map(|chunk| {
                let (tag, rest) = chunk.split_once('>')?;
                let text = rest.split("</text>").next()?.trim().to_string();
                Some((attr(tag, "x")?, attr(tag, "y")?, text))
            })
            .collect()
    }

    #[test]
    fn every_p99_panel_has_readable_labels_around_its_points() {
        let dir = std::env::temp_dir().join(format!("stoa-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("quick.svg");
        svg(&quick_like(), &file).expect("plot");
        let text = std::fs::read_to_string(&file).expect("read");
        if std::env::var_os("KEEP_PLOT").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let all = texts(&text);
        assert!(
            all.iter()
                .any(|(_, _, t)| t == "stoa-bench compare: stoa in worker mode thread"),
            "the title names the worker mode"
        );
        // The right column's y labels (the p99 panels), one panel per row.
        let header = all
            .iter()
            .filter(|(_, _, t)| t.ends_with("p99 latency"))
            .map(|(_, y, _)| *y)
            .collect::<Vec<f64>>();
        assert_eq!(header.len(), 3, "three p99 panels");
        let half = f64::from(WIDTH / 2);
        for (row, top) in header.iter().enumerate() {
            let mut labels: Vec<(f64, f64)> = all
                .iter()
                .filter(|(x, y, _)| {
                    *x > half
                        && *x < half + f64::from(Y_LABEL_AREA + MARGIN) + 4.0
                        && *y > *top
                        && *y < top + f64::from(ROW_HEIGHT) - f64::from(X_LABEL_AREA)
                })
                .filter_map(|(_, y, t)| Some((*y, t.parse::<f64>().ok()?)))
                .collect();
            labels.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(labels.len() >= 3, "row {row}: labels {labels:?}");
            for w in labels.windows(2) {
                assert!(
                    w[1].0 - w[0].0 >= MIN_LABEL_GAP - 1.0,
                    "row {row}: labels {} and {} overlap: {labels:?}",
                    w[0].1,
                    w[1].1
                );
            }
            let values: Vec<f64> = labels.iter().map(|l| l.1).collect();
            let lowest = values.iter().copied().fold(f64::INFINITY, f64::min);
            let highest = values.iter().copied().fold(0.0, f64::max);
            assert!(
                lowest <= 27.0,
                "row {row}: lowest label {lowest} above 27 ms"
            );
            assert!(
                highest >= 1460.0,
                "row {row}: highest label {highest} below 1460 ms"
            );
        }
    }

    #[test]
    fn log_ticks_bound_the_values_and_keep_apart() {
        for (lo, hi, height) in [
            (27.0, 1460.0, 270.0),
            (0.05, 3.0, 270.0),
            (1.0, 1e6, 200.0),
            (5.0, 5.0, 270.0),
        ] {
            let (a, b, ticks) = log_ticks(lo, hi, height);
            assert!(a <= lo && b >= hi && a < b, "{lo}..{hi}: {a}..{b}");
            assert_eq!((ticks[0], ticks[ticks.len() - 1]), (a, b));
            let per_decade = height / (b / a).log10();
            for w in ticks.windows(2) {
                assert!(
                    (w[1] / w[0]).log10() * per_decade >= MIN_LABEL_GAP,
                    "{ticks:?}"
                );
            }
        }
        assert_eq!(format_value(20.0), "20");
        assert_eq!(format_value(0.5), "0.5");
    }
}
