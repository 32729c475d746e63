//! Line charts as inline SVG, drawn on the server: no chart library, no script.

use maud::{html, Markup};

/// One line: its name, its CSS colour variable, and a value per minute (`None`: no data).
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    pub values: Vec<Option<f64>>,
}

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 180.0;
const LEFT: f64 = 48.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 8.0;

/// A chart titled `title` of `series` over the same minutes, `first` and `last` labelling the
/// ends of the time axis and `unit` formatting the top of the value axis.
pub fn lines(
    title: &str,
    series: &[Series<'_>],
    first: &str,
    last: &str,
    unit: impl Fn(f64) -> String,
) -> Markup {
    let points = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let top = if top > 0.0 { top } else { 1.0 };
    let x = |i: usize| LEFT + (WIDTH - LEFT - 4.0) * i as f64 / (points.max(2) - 1) as f64;
    let y = |v: f64| TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - v / top);
    html! {
        figure {
            figcaption { (title) }
            svg.chart viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" aria-label=(title) {
                line.grid x1=(LEFT) y1=(y(top)) x2=(WIDTH) y2=(y(top)) {}
                line.grid x1=(LEFT) y1=(y(0.0)) x2=(WIDTH) y2=(y(0.0)) {}
                text x="2" y=(y(top) + 4.0) { (unit(top)) }
                text x="2" y=(y(0.0)) { "0" }
                text x=(LEFT) y=(HEIGHT - 4.0) { (first) }
                text x=(WIDTH - 4.0) y=(HEIGHT - 4.0) text-anchor="end" { (last) }
                @for s in series {
                    polyline fill="none" stroke-width="1.6" style=(format!("stroke: var({})", s.colour))
                        points=(path(&s.values, &x, &y)) {}
                    // A minute with data between two without would be no line at all: a dot.
                    @for i in isolated(&s.values) {
                        @if let Some(v) = s.values[i] {
                            circle cx=(format!("{:.1}", x(i))) cy=(format!("{:.1}", y(v))) r="2.5"
                                style=(format!("fill: var({})", s.colour)) {}
                        }
                    }
                }
            }
            div.legend {
                @for s in series {
                    span { i style=(format!("background: var({})", s.colour)) {} (s.name) }
                }
            }
        }
    }
}

/// The polyline's points; a minute without data is left out.
fn path(values: &[Option<f64>], x: &impl Fn(usize) -> f64, y: &impl Fn(f64) -> f64) -> String {
    values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The minutes with data whose neighbours have none.
fn isolated(values: &[Option<f64>]) -> Vec<usize> {
    (0..values.len())
        .filter(|&i| {
            values[i].is_some()
                && (i == 0 || values[i - 1].is_none())
                && values.get(i + 1).is_none_or(|v| v.is_none())
        })
        .collect()
}
