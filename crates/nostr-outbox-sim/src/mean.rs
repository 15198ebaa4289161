//! Means with their standard errors, as every bench table reports them.

use serde::Serialize;

/// A mean with its standard error over `n` samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MeanSe {
    /// The mean.
    pub mean: f64,
    /// Standard error of the mean (0 for one sample).
    pub se: f64,
    /// Samples.
    pub n: usize,
}

impl MeanSe {
    /// Mean and standard error of `xs`.
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len();
        if n == 0 {
            return Self::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let se = if n < 2 {
            0.0
        } else {
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            (var / n as f64).sqrt()
        };
        Self { mean, se, n }
    }
}
