//! `circuits.json`: what every head's weights alone say about it (Elhage et al. 2021, "A
//! Mathematical Framework for Transformer Circuits"), from its QK circuit `q k^T` and OV
//! circuit `v o` (`[d_model, d_model]`, kept as their `d_head`-wide factors):
//! composition between layers ([`crate::circuits::composition`]), copying ([`crate::circuits::copying`]) and
//! effective rank ([`crate::circuits::rank`]). Layer norms, biases and positions are left out of all
//! three (see each module). It also holds the attention rollout of probe sequence 0
//! ([`crate::circuits::rollout`]), the one measure of the file read from activations, not weights.

pub mod composition;
pub mod copying;
pub mod linalg;
pub mod rank;
pub mod rollout;

use burn::prelude::*;
use model::{Encoder, HeadId};
use run::snapshot::{HeadTensors, HeadTensorsByLayer};
use run::tensor_file::HostTensor;
use serde::{Deserialize, Serialize};

use crate::circuits::composition::{Composition, composition_matrix, random_composition_score};
use crate::circuits::copying::{eigenvalue_score, full_eigenvalues, low_rank_eigenvalues};
use crate::circuits::linalg::{Complex, LowRank, Matrix, NoConvergence};
use crate::circuits::rank::{
    concatenated_singular_values, effective_rank, low_rank_singular_values,
};
use rayon::prelude::*;

/// One head's weights in f64, in the orientation of the forward pass (biases left out).
#[derive(Debug, Clone, PartialEq)]
pub struct HeadCircuit {
    /// `[d_model, d_head]`.
    pub q: Matrix,
    /// `[d_model, d_head]`.
    pub k: Matrix,
    /// `[d_model, d_head]`.
    pub v: Matrix,
    /// `[d_head, d_model]`.
    pub o: Matrix,
}

impl HeadCircuit {
    /// One head's circuit from its weights.
    ///
    /// # Panics
    /// If a projection is not a matrix.
    pub fn from_weights(head: &HeadTensors) -> Self {
        let matrix = |tensor: &HostTensor| {
            let [rows, cols] = tensor.shape[..] else {
                panic!("a head's projection is a matrix, not {:?}", tensor.shape);
            };
            Matrix::from_f32(rows, cols, &tensor.values)
        };
        Self {
            q: matrix(&head.q),
            k: matrix(&head.k),
            v: matrix(&head.v),
            o: matrix(&head.o),
        }
    }

    /// The QK circuit `q k^T`.
    pub fn qk(&self) -> LowRank {
        LowRank::new(self.q.clone(), self.k.transpose())
    }

    /// The OV circuit `v o`.
    pub fn ov(&self) -> LowRank {
        LowRank::new(self.v.clone(), self.o.clone())
    }
}

/// `circuits.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Circuits {
    /// Width of the residual stream: the circuits are `[d_model, d_model]`.
    pub d_model: usize,
    /// Width of each head: the most rank a head's circuit can have.
    pub d_head: usize,
    /// Input tokens: rows of the embedding.
    pub vocab_size: usize,
    /// Output classes: columns of the output layer.
    pub n_outputs: usize,
    /// What heads with unrelated subspaces score on average, `1 / sqrt(d_model)`.
    pub random_composition: f64,
    /// One entry per pair of layers `layer_a < layer_b`, in order (0, 1), (0, 2), ...,
    /// (1, 2), ...
    pub composition: Vec<LayerComposition>,
    /// One entry per head, layer-major.
    pub heads: Vec<HeadCircuits>,
    /// One entry per layer.
    pub layers: Vec<LayerRanks>,
    /// Attention rollout on probe sequence 0 after each layer, `[n_layers][seq][seq]` (row:
    /// query, column: input position; rows sum to 1). Empty in a `circuits.json` written
    /// before it was measured, and from [`Circuits::measure`], which sees no activations.
    #[serde(default)]
    pub rollout: Vec<Vec<Vec<f64>>>,
}

/// Composition of the heads of `layer_a` (rows) into those of the later `layer_b`
/// (columns): `q[a][b]` is head `a`'s Q-composition score with head `b`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerComposition {
    /// The earlier layer, whose heads write.
    pub layer_a: usize,
    /// The later layer, whose heads read.
    pub layer_b: usize,
    /// Q-composition, `[n_heads][n_heads]`.
    pub q: Vec<Vec<f64>>,
    /// K-composition, `[n_heads][n_heads]`.
    pub k: Vec<Vec<f64>>,
    /// V-composition, `[n_heads][n_heads]`.
    pub v: Vec<Vec<f64>>,
}

/// One head's copying scores and ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadCircuits {
    /// The head (`layer` and `head` in the JSON).
    #[serde(flatten)]
    pub id: HeadId,
    /// `sum(lambda) / sum(|lambda|)` of `ov`'s eigenvalues, in [-1, 1].
    pub copying_score: f64,
    /// `ov`'s eigenvalues as `[re, im]`, largest modulus first: `d_head` of them (the
    /// circuit's other `d_model - d_head` are 0).
    pub ov_eigenvalues: Vec<[f64; 2]>,
    /// The score of the full circuit `E ov U` (`[vocab_size, n_outputs]`); `None` (null)
    /// unless `vocab_size == n_outputs`.
    pub full_copying_score: Option<f64>,
    /// The full circuit's eigenvalues as `[re, im]`, `d_head` of them; `None` (null) unless
    /// `vocab_size == n_outputs`.
    pub full_eigenvalues: Option<Vec<[f64; 2]>>,
    /// Singular values of `q k^T`, largest first, `d_head` of them.
    pub qk_singular_values: Vec<f64>,
    /// Effective rank of `q k^T`, in [0, d_head].
    pub qk_effective_rank: f64,
    /// Singular values of `v o`, largest first, `d_head` of them.
    pub ov_singular_values: Vec<f64>,
    /// Effective rank of `v o`, in [0, d_head].
    pub ov_effective_rank: f64,
}

/// One layer's heads' projections side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerRanks {
    /// Layer index.
    pub layer: usize,
    /// Singular values of `[q_0 | q_1 | ...]`, `[d_model, n_heads * d_head]`, largest first:
    /// `min(d_model, n_heads * d_head)` of them.
    pub query_singular_values: Vec<f64>,
    /// Effective rank of the concatenated queries.
    pub query_effective_rank: f64,
    /// Singular values of `[k_0 | k_1 | ...]`, like the queries'.
    pub key_singular_values: Vec<f64>,
    /// Effective rank of the concatenated keys.
    pub key_effective_rank: f64,
}

/// A circuit whose eigenvalues did not converge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the copying score of head {head} ({circuit}): {cause}")]
pub struct CircuitError {
    /// The head.
    pub head: HeadId,
    /// `ov` or the full circuit.
    pub circuit: &'static str,
    /// Why. Not a `source`: the message already says it, and `error: {e:#}` in main would
    /// print it twice.
    pub cause: NoConvergence,
}

impl Circuits {
    /// Every measure of `model`'s heads, whose weights `weights` holds.
    pub fn of_model(model: &Encoder, weights: &HeadTensorsByLayer) -> Result<Self, CircuitError> {
        let heads: Vec<Vec<HeadCircuit>> = weights
            .layers
            .iter()
            .map(|layer| layer.iter().map(HeadCircuit::from_weights).collect())
            .collect();
        let host = |tensor: Tensor<2>| {
            let [rows, cols] = tensor.dims();
            Matrix::from_f32(rows, cols, &HostTensor::of(tensor).values)
        };
        // As the residual stream reads them: through a factorised model's projection.
        let embedding = host(model.token_embeddings()); // [vocab, d_model]
        let unembedding = host(model.unembedding()); // [d_model, n_outputs]
        Self::measure(&heads, &embedding, &unembedding)
    }

    /// Every measure of `heads` (`[layer][head]`), with the token `embedding`
    /// (`[vocab_size, d_model]`) and the output layer's `unembedding` (`[d_model,
    /// n_outputs]`) for the full OV circuits.
    ///
    /// # Panics
    /// If the heads' sizes or the layers' head counts differ.
    pub fn measure(
        heads: &[Vec<HeadCircuit>],
        embedding: &Matrix,
        unembedding: &Matrix,
    ) -> Result<Self, CircuitError> {
        let first = heads.first().and_then(|layer| layer.first());
        let (d_model, d_head) = first.map_or((embedding.cols(), 0), |h| (h.q.rows(), h.q.cols()));
        assert!(
            heads.iter().all(|layer| layer.len() == heads[0].len()),
            "every layer has the same number of heads"
        );
        let circuits: Vec<Vec<(LowRank, LowRank)>> = heads
            .iter()
            .map(|layer| layer.iter().map(|h| (h.qk(), h.ov())).collect())
            .collect();

        let composition = layer_compositions(&circuits);
        // `U E`, `[d_model, d_model]`, once: every head's full circuit `(E L) (R U)` has the
        // nonzero eigenvalues of `R (U E) L`, `[d_head, d_head]`, so no head multiplies
        // through the vocabulary (30522 word pieces in BERT) again.
        let unembed_embed =
            (embedding.rows() == unembedding.cols()).then(|| unembedding.matmul(embedding));
        // Every head, and every layer's ranks, on rayon's threads: each is computed alone and
        // collected in order, so the numbers do not depend on the threads.
        let every_head: Vec<(HeadId, &(LowRank, LowRank))> = circuits
            .iter()
            .enumerate()
            .flat_map(|(layer, heads)| {
                let ids = (0..heads.len()).map(move |head| HeadId::new(layer, head));
                ids.zip(heads)
            })
            .collect();
        let head_records = every_head
            .into_par_iter()
            .map(|(id, (qk, ov))| head_circuits(id, qk, ov, unembed_embed.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let layers = heads
            .par_iter()
            .enumerate()
            .map(|(layer, layer_heads)| layer_ranks(layer, layer_heads))
            .collect();

        Ok(Self {
            d_model,
            d_head,
            vocab_size: embedding.rows(),
            n_outputs: unembedding.cols(),
            random_composition: random_composition_score(d_model),
            composition,
            heads: head_records,
            layers,
            rollout: vec![],
        })
    }

    /// Head `id`'s circuits.
    ///
    /// # Panics
    /// If there is no such head.
    pub fn head(&self, id: HeadId) -> &HeadCircuits {
        self.heads
            .iter()
            .find(|h| h.id == id)
            .unwrap_or_else(|| panic!("no head {id}"))
    }
}

/// Composition of every layer's heads into every later layer's, for each pair of layers in
/// the order of [`Circuits::composition`]; `circuits` is `[layer][head]` (QK, OV).
fn layer_compositions(circuits: &[Vec<(LowRank, LowRank)>]) -> Vec<LayerComposition> {
    let pairs: Vec<(usize, usize)> = (0..circuits.len())
        .flat_map(|a| (a + 1..circuits.len()).map(move |b| (a, b)))
        .collect();
    pairs
        .into_par_iter()
        .map(|(layer_a, layer_b)| {
            let earlier_ov: Vec<LowRank> =
                circuits[layer_a].iter().map(|(_, ov)| ov.clone()).collect();
            let later = &circuits[layer_b];
            let [q, k, v] =
                Composition::ALL.map(|kind| composition_matrix(kind, &earlier_ov, later));
            LayerComposition {
                layer_a,
                layer_b,
                q,
                k,
                v,
            }
        })
        .collect()
}

/// Head `id`'s copying scores and ranks, from its circuits `qk` and `ov`; the full circuit
/// `E ov U` only when the embedding and the output layer make it square (`unembed_embed`:
/// `U E`).
fn head_circuits(
    id: HeadId,
    qk: &LowRank,
    ov: &LowRank,
    unembed_embed: Option<&Matrix>,
) -> Result<HeadCircuits, CircuitError> {
    let fail = |circuit, cause| CircuitError {
        head: id,
        circuit,
        cause,
    };
    let ov_eigenvalues = low_rank_eigenvalues(ov).map_err(|e| fail("ov", e))?;
    let full_eigenvalues = match unembed_embed {
        Some(ue) => Some(full_eigenvalues(ov, ue).map_err(|e| fail("E ov U", e))?),
        None => None,
    };
    let qk_singular_values = low_rank_singular_values(qk);
    let ov_singular_values = low_rank_singular_values(ov);
    Ok(HeadCircuits {
        id,
        copying_score: eigenvalue_score(&ov_eigenvalues),
        ov_eigenvalues: pairs(&ov_eigenvalues),
        full_copying_score: full_eigenvalues.as_deref().map(eigenvalue_score),
        full_eigenvalues: full_eigenvalues.as_deref().map(pairs),
        qk_effective_rank: effective_rank(&qk_singular_values),
        qk_singular_values,
        ov_effective_rank: effective_rank(&ov_singular_values),
        ov_singular_values,
    })
}

/// Layer `layer`'s queries and keys, each of its heads' side by side, and their ranks.
fn layer_ranks(layer: usize, layer_heads: &[HeadCircuit]) -> LayerRanks {
    let queries: Vec<Matrix> = layer_heads.iter().map(|h| h.q.clone()).collect();
    let keys: Vec<Matrix> = layer_heads.iter().map(|h| h.k.clone()).collect();
    let query_singular_values = concatenated_singular_values(&queries);
    let key_singular_values = concatenated_singular_values(&keys);
    LayerRanks {
        layer,
        query_effective_rank: effective_rank(&query_singular_values),
        query_singular_values,
        key_effective_rank: effective_rank(&key_singular_values),
        key_singular_values,
    }
}

/// Eigenvalues as `[re, im]` pairs, for JSON.
fn pairs(values: &[Complex]) -> Vec<[f64; 2]> {
    values.iter().map(|z| [z.re, z.im]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D_MODEL: usize = 16;
    const D_HEAD: usize = 4;

    /// `[D_MODEL, D_HEAD]` reading coordinates `from..from + D_HEAD`, times `sign`.
    fn reads(from: usize, sign: f64) -> Matrix {
        let mut m = Matrix::zeros(D_MODEL, D_HEAD);
        for i in 0..D_HEAD {
            m[(from + i, i)] = sign;
        }
        m
    }

    fn head(q: usize, k: usize, v: usize, o: usize, o_sign: f64) -> HeadCircuit {
        HeadCircuit {
            q: reads(q, 1.0),
            k: reads(k, 1.0),
            v: reads(v, 1.0),
            o: reads(o, o_sign).transpose(),
        }
    }

    /// Two layers of two heads on four 4-dimensional blocks of the residual stream, B0 =
    /// e_0..e_3, B1, B2, B3. Layer 0: head 0 moves B0 into B2, head 1 moves B1 into B3.
    /// Layer 1: head 0's key reads B2 (what L0H0 writes), its query B0, its value B3 (what
    /// L0H1 writes), and it writes B3 back (copying); head 1's query reads B3, its key B1,
    /// and it writes minus what it reads from B0 (anti-copying).
    fn two_layers() -> Vec<Vec<HeadCircuit>> {
        vec![
            vec![head(0, 4, 0, 8, 1.0), head(0, 4, 4, 12, 1.0)],
            vec![head(0, 8, 12, 12, 1.0), head(12, 4, 0, 0, -1.0)],
        ]
    }

    #[test]
    fn a_hand_built_two_layer_model_has_the_composition_copying_and_ranks_it_was_built_with() {
        // Vocabulary 4: token t is e_t (B0); the output layer reads class t from B2, so the
        // full circuit of L0H0 (B0 -> B2) is the identity.
        let mut embedding = Matrix::zeros(4, D_MODEL);
        let mut unembedding = Matrix::zeros(D_MODEL, 4);
        for t in 0..4 {
            embedding[(t, t)] = 1.0;
            unembedding[(8 + t, t)] = 1.0;
        }
        let circuits = Circuits::measure(&two_layers(), &embedding, &unembedding).unwrap();
        assert_eq!((circuits.d_model, circuits.d_head), (D_MODEL, D_HEAD));
        assert_eq!((circuits.vocab_size, circuits.n_outputs), (4, 4));

        assert_eq!(circuits.composition.len(), 1);
        let pair = &circuits.composition[0];
        assert_eq!((pair.layer_a, pair.layer_b), (0, 1));
        // Four aligned unit directions: ||A B|| / (||A|| ||B||) = 2 / (2 * 2).
        assert!((pair.k[0][0] - 0.5).abs() < 1e-12, "{pair:?}");
        assert_eq!(pair.k[1][0], 0.0, "L1H0's key reads nothing L0H1 writes");
        assert!(
            (pair.q[1][1] - 0.5).abs() < 1e-12,
            "L1H1's query reads what L0H1 writes"
        );
        assert_eq!(pair.q[0][1], 0.0);
        assert!(
            (pair.v[1][0] - 0.5).abs() < 1e-12,
            "L1H0's value reads L0H1's output"
        );
        assert_eq!(pair.v[0][0], 0.0);
        // Nothing else composes.
        assert_eq!(
            pair.q[0][0] + pair.k[0][1] + pair.k[1][1] + pair.v[0][1],
            0.0
        );
        assert_eq!(pair.q[1][0] + pair.v[1][1], 0.0);

        // L0H0 writes where it does not read (score 0) but maps token t to class t.
        let copier = circuits.head(HeadId::new(0, 0));
        assert_eq!(copier.copying_score, 0.0);
        assert!((copier.full_copying_score.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(
            circuits.head(HeadId::new(0, 1)).full_copying_score,
            Some(0.0)
        );
        assert!((circuits.head(HeadId::new(1, 0)).copying_score - 1.0).abs() < 1e-12);
        assert!((circuits.head(HeadId::new(1, 1)).copying_score + 1.0).abs() < 1e-12);
        assert_eq!(copier.ov_eigenvalues.len(), D_HEAD);

        // Every circuit maps four unit directions to four: effective rank 4.
        for h in &circuits.heads {
            assert!((h.qk_effective_rank - 4.0).abs() < 1e-12, "{h:?}");
            assert!((h.ov_effective_rank - 4.0).abs() < 1e-12, "{h:?}");
            assert_eq!(h.qk_singular_values.len(), D_HEAD);
        }
        // Layer 0's queries both read B0 (shared: 4); layer 1's read B0 and B3 (8). Keys:
        // layer 0 B1 twice (4), layer 1 B2 and B1 (8).
        let ranks: Vec<(f64, f64)> = circuits
            .layers
            .iter()
            .map(|l| (l.query_effective_rank, l.key_effective_rank))
            .collect();
        for (got, expected) in ranks.iter().zip([(4.0, 4.0), (8.0, 8.0)]) {
            assert!((got.0 - expected.0).abs() < 1e-12 && (got.1 - expected.1).abs() < 1e-12);
        }
        assert_eq!(
            circuits.layers[0].query_singular_values.len(),
            D_MODEL.min(2 * D_HEAD)
        );
    }

    #[test]
    fn the_full_circuit_is_scored_only_when_inputs_and_outputs_match() {
        let embedding = Matrix::identity(D_MODEL);
        let unembedding = Matrix::zeros(D_MODEL, 3);
        let circuits = Circuits::measure(&two_layers(), &embedding, &unembedding).unwrap();
        assert!(
            circuits
                .heads
                .iter()
                .all(|h| h.full_copying_score.is_none())
        );
        let json = serde_json::to_value(&circuits).unwrap();
        assert!(json["heads"][0]["full_copying_score"].is_null());
        assert!(json["heads"][0]["full_eigenvalues"].is_null());
        // numpy-ready shapes: [heads][heads] matrices, [re, im] pairs.
        assert_eq!(json["composition"][0]["k"].as_array().unwrap().len(), 2);
        assert_eq!(
            json["heads"][3]["ov_eigenvalues"][0]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let back: Circuits = serde_json::from_value(json).unwrap();
        assert_eq!(back, circuits);
    }

    #[test]
    fn one_layer_has_no_composition() {
        let layer = vec![two_layers().remove(0)];
        let circuits = Circuits::measure(
            &layer,
            &Matrix::identity(D_MODEL),
            &Matrix::identity(D_MODEL),
        )
        .unwrap();
        assert!(circuits.composition.is_empty());
        assert_eq!(circuits.layers.len(), 1);
        // With E = U = I the full circuit is ov itself.
        for h in &circuits.heads {
            assert_eq!(h.full_copying_score, Some(h.copying_score));
        }
    }

    #[test]
    fn a_circuit_that_does_not_converge_is_named_in_one_message() {
        let error = CircuitError {
            head: HeadId::new(1, 3),
            circuit: "ov",
            cause: NoConvergence {
                n: 16,
                iterations: 480,
            },
        };
        assert_eq!(
            error.to_string(),
            "the copying score of head L1H3 (ov): the eigenvalues of a 16 x 16 matrix did \
             not converge in 480 QR iterations"
        );
        assert!(
            std::error::Error::source(&error).is_none(),
            "said once, not as a cause"
        );
    }
}
