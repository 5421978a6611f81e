//! Calibrated abstention: whether the collection holds an answer to a question at all, decided
//! from several signals of the lexical ranking by a small logistic regression. Pure (no I/O).
//!
//! Signals ([`FEATURES`], computed by `embedded::features`):
//! - `top_score`: the best hit's score (coverage × BM25 factor, 0–1);
//! - `top_coverage`: the IDF-weighted share of the question's terms the best hit contains;
//! - `margin`: best score minus the second best;
//! - `unknown_share`: IDF share of the question's terms found nowhere in the collection
//!   (the "Book of Kells" signal: a named thing the museum does not have);
//! - `entity_coverage`: share of the three rarest terms (names and titles, by IDF) in the best hit;
//! - `cjk`: 1 for a question with Chinese characters (the two scripts score differently);
//! - `terms`: ln(1 + number of question terms);
//! - `names_missing`: 1 when any of the question's named things (quoted or bracketed titles,
//!   capitalised names: [`super::text::named_phrases`]) is missing from the best hit's text.
//!
//! The model is fitted by [`fit`] (standardised features, L2-regularised logistic regression,
//! full-batch gradient descent, deterministic) on questions labelled answerable (the relevant
//! exhibit was ranked in the top 5) or not (no relevant exhibit exists). The decision
//! threshold is the highest probability that keeps the training set's wrongly refused
//! answerable questions at or under [`MAX_TRAIN_FALSE_ABSTENTION`]. The shipped fit
//! (`abstention.json`, from `museum-agent eval --fit --out`) is used until a museum fits its
//! own with `museum-agent eval --fit`, which stores it with the index.

use serde::{Deserialize, Serialize};

pub const FEATURES: [&str; 8] = [
    "top_score",
    "top_coverage",
    "margin",
    "unknown_share",
    "entity_coverage",
    "cjk",
    "terms",
    "names_missing",
];
pub const N_FEATURES: usize = FEATURES.len();

/// Share of the training set's answerable questions the threshold may refuse.
pub const MAX_TRAIN_FALSE_ABSTENTION: f64 = 0.02;
/// L2 penalty (on standardised weights, per example).
pub const L2: f64 = 0.01;
const ITERATIONS: usize = 3000;
const STEP: f64 = 0.5;

pub type Features = [f64; N_FEATURES];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbstentionModel {
    pub features: Vec<String>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
    /// Answer when the probability is at least this.
    pub threshold: f64,
    /// What it was fitted on (free text, for humans).
    #[serde(default)]
    pub fitted_on: String,
}

const SHIPPED: &str = include_str!("abstention.json");

impl AbstentionModel {
    /// The fit shipped with the program (fitted on the project's 200 dev questions).
    pub fn shipped() -> AbstentionModel {
        AbstentionModel::from_json(SHIPPED).expect("the shipped abstention.json is valid")
    }

    /// Parses a stored model; None when it is malformed or for another feature set.
    pub fn from_json(s: &str) -> Option<AbstentionModel> {
        let m: AbstentionModel = serde_json::from_str(s).ok()?;
        let ok = m.features == FEATURES
            && m.mean.len() == N_FEATURES
            && m.scale.len() == N_FEATURES
            && m.weights.len() == N_FEATURES
            && m.mean
                .iter()
                .chain(&m.scale)
                .chain(&m.weights)
                .all(|x| x.is_finite())
            && m.bias.is_finite()
            && m.threshold.is_finite();
        ok.then_some(m)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Probability that the collection answers a question with these signals.
    pub fn probability(&self, f: &Features) -> f64 {
        let z: f64 = self.bias
            + (0..N_FEATURES)
                .map(|i| self.weights[i] * (f[i] - self.mean[i]) / self.scale[i])
                .sum::<f64>();
        sigmoid(z)
    }

    pub fn answers(&self, f: &Features) -> bool {
        self.probability(f) >= self.threshold
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Fits the model on `(features, answerable)` examples. Deterministic.
pub fn fit(examples: &[(Features, bool)], fitted_on: &str) -> AbstentionModel {
    let n = examples.len().max(1) as f64;
    let mut mean = vec![0.0; N_FEATURES];
    let mut scale: Vec<f64> = vec![0.0; N_FEATURES];
    for (f, _) in examples {
        for i in 0..N_FEATURES {
            mean[i] += f[i] / n;
        }
    }
    for (f, _) in examples {
        for i in 0..N_FEATURES {
            scale[i] += (f[i] - mean[i]).powi(2) / n;
        }
    }
    for s in &mut scale {
        *s = if s.sqrt() > 1e-9 { s.sqrt() } else { 1.0 };
    }
    let xs: Vec<Vec<f64>> = examples
        .iter()
        .map(|(f, _)| {
            (0..N_FEATURES)
                .map(|i| (f[i] - mean[i]) / scale[i])
                .collect()
        })
        .collect();
    // Classes weighted equally (there are far more answerable questions than negatives).
    let pos = examples.iter().filter(|e| e.1).count().max(1) as f64;
    let neg = examples.iter().filter(|e| !e.1).count().max(1) as f64;
    let mut w = vec![0.0; N_FEATURES];
    let mut b = 0.0;
    for _ in 0..ITERATIONS {
        let mut gw = [0.0; N_FEATURES];
        let mut gb = 0.0;
        let mut total = 0.0;
        for (x, (_, y)) in xs.iter().zip(examples) {
            let z = b + x.iter().zip(&w).map(|(a, c)| a * c).sum::<f64>();
            let cw = if *y { 0.5 / pos } else { 0.5 / neg };
            let err = (sigmoid(z) - f64::from(u8::from(*y))) * cw;
            for i in 0..N_FEATURES {
                gw[i] += err * x[i];
            }
            gb += err;
            total += cw;
        }
        for i in 0..N_FEATURES {
            w[i] -= STEP * (gw[i] / total + L2 * w[i]);
        }
        b -= STEP * gb / total;
    }
    let mut model = AbstentionModel {
        features: FEATURES.iter().map(|s| s.to_string()).collect(),
        mean,
        scale,
        weights: w,
        bias: b,
        threshold: 0.5,
        fitted_on: fitted_on.to_string(),
    };
    let mut p: Vec<f64> = examples
        .iter()
        .filter(|e| e.1)
        .map(|(f, _)| model.probability(f))
        .collect();
    p.sort_by(f64::total_cmp);
    // Refuse at most floor(MAX × positives) of the training positives: the threshold sits just
    // under the next one (midway to the previous, so it is not on a training point).
    let allowed = (MAX_TRAIN_FALSE_ABSTENTION * p.len() as f64).floor() as usize;
    if let Some(&at) = p.get(allowed) {
        let below = if allowed == 0 { 0.0 } else { p[allowed - 1] };
        model.threshold = (at + below) / 2.0;
    }
    model
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_model_parses() {
        let m = AbstentionModel::shipped();
        assert_eq!(m.features, FEATURES);
        assert!(AbstentionModel::from_json(&m.to_json()).is_some());
        assert!(AbstentionModel::from_json("{}").is_none());
    }

    #[test]
    fn fit_separates_a_separable_set_and_keeps_positives() {
        let mut ex = Vec::new();
        for i in 0..40 {
            let s = 0.5 + f64::from(i) / 100.0;
            ex.push(([s, s, 0.1, 0.0, 1.0, 0.0, 1.5, 0.0], true));
        }
        for i in 0..10 {
            let s = 0.1 + f64::from(i) / 100.0;
            ex.push(([s, s, 0.0, 0.5, 0.0, 0.0, 1.5, 1.0], false));
        }
        let m = fit(&ex, "test");
        assert!(ex.iter().filter(|e| e.1).all(|(f, _)| m.answers(f)));
        assert!(ex.iter().filter(|e| !e.1).all(|(f, _)| !m.answers(f)));
        assert!(m.weights[0] > 0.0 && m.weights[3] < 0.0, "{m:?}");
        // Deterministic.
        assert_eq!(fit(&ex, "test"), m);
    }
}
