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

/// Writes the plot; an empty matrix gives an SVG that says so.
pub fn svg(points: &[Point], file: &Path) -> Result<(), String> {
    let sweep: Vec<&Point> = points.iter().filter(|p| p.idle.is_none()).collect();
    let panels = panels(&sweep);
    let rows = panels.len().max(1);
    let root = SVGBackend::new(file, (1200, 360 * rows as u32)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("plot {}: {e}", file.display());
    root.fill(&WHITE).map_err(err)?;
    if panels.is_empty() {
        root.draw_text(
            "no data",
            &("sans-serif", 20).into_text_style(&root),
            (20, 20),
        )
        .map_err(err)?;
    }
    let areas = root.split_evenly((rows, 2));
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
            &rps,
            false,
        )
        .map_err(err)?;
        draw(
            &areas[row * 2 + 1],
            &format!("{title}: p99 latency"),
            "p99 ms",
            &p99,
            true,
        )
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
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
    matches!(server, "select" | "poll" | "epoll" | "io_uring" | "auto")
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

/// Draws the mesh, one line with its points per series, and the legend: the
/// same for a linear and a logarithmic y axis, whose chart types differ.
macro_rules! draw_lines {
    ($c:expr, $y_desc:expr, $lines:expr) => {{
        let c = &mut $c;
        let (y_desc, lines) = ($y_desc, $lines);
        c.configure_mesh()
            .x_desc("connections")
            .y_desc(y_desc)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format_value(*v))
            .draw()?;
        for (i, (name, pts)) in lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
            c.draw_series(pts.iter().map(|&xy| Circle::new(xy, 3, color.filled())))?;
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }};
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    lines: &[Series],
    log_y: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let xs = lines.iter().flat_map(|(_, p)| p.iter().map(|v| v.0));
    let ys = lines.iter().flat_map(|(_, p)| p.iter().map(|v| v.1));
    let (x_min, x_max) = bounds(xs, 1.0);
    let (y_min, y_max) = bounds(ys, 1.0);
    let x_range = (x_min / 1.5).max(0.5)..x_max * 1.5;
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70);
    if log_y {
        let mut c = chart
            .build_cartesian_2d(x_range.log_scale(), (y_min / 2.0..y_max * 2.0).log_scale())?;
        draw_lines!(c, y_desc, lines);
    } else {
        let mut c = chart.build_cartesian_2d(x_range.log_scale(), 0.0..y_max * 1.15)?;
        draw_lines!(c, y_desc, lines);
    }
    Ok(())
}

/// Axis labels: integers for large values, a few decimals for small ones.
fn format_value(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
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
