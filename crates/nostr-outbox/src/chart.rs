//! The recall-by-session chart of `outbox bench --chart`, as SVG (no system fonts needed:
//! the SVG backend writes text as `<text>` elements for the viewer to render).

use std::path::Path;

use nostr_outbox_sim::Window;
use plotters::prelude::*;

/// Draws one line per strategy: mean declared recall (%) in `window` by session.
pub fn draw(path: &Path, series: &[(String, Vec<f64>)], window: Window) -> anyhow::Result<()> {
    let sessions = series
        .iter()
        .map(|(_, v)| v.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("declared {window} recall by session"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..(sessions - 1) as f64, 0f64..100f64)?;
    chart
        .configure_mesh()
        .x_desc("session")
        .y_desc("recall %")
        .x_labels(sessions)
        .draw()?;
    for (i, (label, values)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                values
                    .iter()
                    .enumerate()
                    .map(|(s, v)| (s as f64, v * 100.0)),
                color.stroke_width(2),
            ))?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}
