//! A small SVG line-chart writer: panels side by side, each with linear
//! axes from 0, ticks, a legend and one polyline per series.

use std::fmt::Write;

const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 300.0;
const MARGIN_L: f64 = 60.0;
const MARGIN_R: f64 = 20.0;
const MARGIN_T: f64 = 40.0;
const MARGIN_B: f64 = 45.0;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// One line: its name and (x, y) points in x order.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// The SVG document of `charts` side by side.
pub fn render(charts: &[Chart]) -> String {
    let width = PANEL_W * charts.len().max(1) as f64;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{PANEL_H}\" \
         viewBox=\"0 0 {width} {PANEL_H}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (i, chart) in charts.iter().enumerate() {
        panel(&mut svg, chart, i as f64 * PANEL_W);
    }
    svg.push_str("</svg>\n");
    svg
}

fn panel(svg: &mut String, chart: &Chart, left: f64) {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) = points.fold((0.0_f64, 0.0_f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let (x_max, y_max) = (nice_ceiling(x_max), nice_ceiling(y_max));
    let (x0, y0) = (left + MARGIN_L, PANEL_H - MARGIN_B);
    let (w, h) = (PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B);
    let sx = |x: f64| x0 + x / x_max * w;
    let sy = |y: f64| y0 - y / y_max * h;
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        x0 + w / 2.0,
        escape(&chart.title)
    );
    let _ = writeln!(svg, "<path d=\"M{x0},{} V{y0} H{}\" stroke=\"black\" fill=\"none\"/>", y0 - h, x0 + w);
    for k in 0..=4 {
        let (xv, yv) = (x_max * k as f64 / 4.0, y_max * k as f64 / 4.0);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
             <line x1=\"{x0}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            sx(xv),
            y0 + 15.0,
            label(xv),
            x0 + w,
            sy(yv),
            sy(yv),
            x0 - 5.0,
            sy(yv) + 4.0,
            label(yv)
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        x0 + w / 2.0,
        PANEL_H - 8.0,
        escape(&chart.x_label)
    );
    let _ = writeln!(
        svg,
        "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        left + 14.0,
        y0 - h / 2.0,
        escape(&chart.y_label)
    );
    for (i, series) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let line: Vec<String> = series.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            line.join(" ")
        );
        for &(x, y) in &series.points {
            let _ = writeln!(svg, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>", sx(x), sy(y));
        }
        let ly = MARGIN_T + 5.0 + 15.0 * i as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            x0 + 10.0,
            x0 + 30.0,
            x0 + 35.0,
            ly + 4.0,
            escape(&series.name)
        );
    }
}

/// The smallest of 1, 2, 2.5, 5 × 10^k at or above `v` (1 for nothing).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&c| c >= v).unwrap_or(10.0 * magnitude)
}

fn label(v: f64) -> String {
    if v == v.trunc() { format!("{v:.0}") } else { format!("{v:.2}").trim_end_matches('0').to_owned() }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_one_polyline_per_series() {
        let series = |name: &str| Series { name: name.into(), points: vec![(10.0, 0.5), (200.0, 3.2)] };
        let chart = Chart {
            title: "a<b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![series("ours"), series("ref")],
        };
        let svg = render(&[chart.clone(), chart]);
        assert_eq!(svg.matches("<polyline").count(), 4);
        assert!(svg.contains("a&lt;b") && svg.ends_with("</svg>\n"));
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(200.0), 200.0);
    }
}
