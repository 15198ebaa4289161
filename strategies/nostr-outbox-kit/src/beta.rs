//! Beta sampling through `rand_distr`, with errors instead of panics.

use rand::{Rng, RngCore};
use rand_distr::{Beta, Distribution};

/// Why a Beta draw could not be made.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BetaError {
    /// α or β is not a finite positive number.
    #[error("invalid beta parameters alpha={alpha} beta={beta}: {reason}")]
    InvalidParameters {
        /// The α given.
        alpha: f64,
        /// The β given.
        beta: f64,
        /// What `rand_distr` said.
        reason: String,
    },
    /// The sampler returned something outside `[0, 1]` (extreme parameters).
    #[error("beta({alpha}, {beta}) produced {value}, outside [0, 1]")]
    OutOfRange {
        /// The α given.
        alpha: f64,
        /// The β given.
        beta: f64,
        /// The value drawn.
        value: f64,
    },
}

/// One draw from Beta(α, β).
///
/// Beta(1, 1) is `U(0,1)`, and is drawn as one: exactly the `f64` the `uniform` scorer would
/// take from the same RNG, so a cold-start Thompson plan equals the plain stochastic plan.
pub fn sample_beta(alpha: f64, beta: f64, rng: &mut dyn RngCore) -> Result<f64, BetaError> {
    if alpha == 1.0 && beta == 1.0 {
        return Ok(rng.random::<f64>());
    }
    if !(alpha.is_finite() && beta.is_finite()) {
        return Err(BetaError::InvalidParameters {
            alpha,
            beta,
            reason: "not finite".into(),
        });
    }
    let dist = Beta::new(alpha, beta).map_err(|e| BetaError::InvalidParameters {
        alpha,
        beta,
        reason: e.to_string(),
    })?;
    let value = dist.sample(rng);
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(BetaError::OutOfRange { alpha, beta, value })
    }
}

/// A draw from Beta(α, β), or from the uniform prior when the parameters are unusable (with a
/// trace event): bad data makes a relay re-enter learning instead of failing the plan.
pub fn draw_or_uniform(alpha: f64, beta: f64, url: &str, rng: &mut dyn RngCore) -> f64 {
    match sample_beta(alpha, beta, rng) {
        Ok(x) => x,
        Err(err) => {
            tracing::warn!(url, %err, "beta draw failed; using the uniform prior");
            rng.random::<f64>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Sample mean and variance of `n` draws.
    fn moments(alpha: f64, beta: f64, n: usize, seed: u64) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let xs: Vec<f64> = (0..n)
            .map(|_| sample_beta(alpha, beta, &mut rng).unwrap())
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (mean, var)
    }

    #[test]
    fn sample_moments_match_the_distribution() {
        let n = 200_000;
        for (i, (a, b)) in [(1.0, 1.0), (2.0, 5.0), (50.0, 3.0), (0.5, 0.5)]
            .into_iter()
            .enumerate()
        {
            let (mean, var) = moments(a, b, n, 7 + i as u64);
            let want_mean = a / (a + b);
            let want_var = a * b / ((a + b).powi(2) * (a + b + 1.0));
            // Standard error of the mean is sqrt(var / n); allow 5 of them. The variance
            // estimate gets a 3% relative tolerance (its standard error here is under 1%).
            let se = (want_var / n as f64).sqrt();
            assert!(
                (mean - want_mean).abs() < 5.0 * se,
                "Beta({a},{b}) mean {mean} want {want_mean}"
            );
            assert!(
                (var - want_var).abs() < 0.03 * want_var,
                "Beta({a},{b}) var {var} want {want_var}"
            );
        }
    }

    #[test]
    fn invalid_parameters_are_errors_not_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (a, b) in [
            (0.0, 1.0),
            (-1.0, 2.0),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
            (2.0, -0.5),
        ] {
            assert!(
                matches!(
                    sample_beta(a, b, &mut rng),
                    Err(BetaError::InvalidParameters { .. })
                ),
                "Beta({a},{b}) should be an error"
            );
            let x = draw_or_uniform(a, b, "wss://x.example", &mut rng);
            assert!((0.0..=1.0).contains(&x));
        }
    }

    #[test]
    fn uniform_prior_draws_exactly_like_uniform() {
        let mut a = ChaCha8Rng::seed_from_u64(3);
        let mut b = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..10 {
            assert_eq!(sample_beta(1.0, 1.0, &mut a).unwrap(), b.random::<f64>());
        }
    }
}
