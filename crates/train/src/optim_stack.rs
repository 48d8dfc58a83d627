//! AdamW's state for a seed stack, split into each seed's and joined back.
//!
//! A [`model::SeedStack`] is trained by one optimizer whose moments are `[seeds, ...]`, one
//! slice per seed. AdamW works elementwise, so seed `s`'s slice is exactly the state a run
//! of that seed alone would hold. Every seed's run keeps its own checkpoints, resumable
//! alone, so the stack's state is cut into per-seed optimizer states keyed by the seed's
//! own parameter ids ([`split`]); a group resumed from its runs' checkpoints, or one that
//! lost a seed that stopped early, is joined again ([`join`]).
//!
//! Both work on Burn's serialised optimizer record (burnpack: per parameter id, tensors
//! named `"{id}.{field}"` and scalars such as `"{id}.__rank"`), the one form of its state that
//! Burn lets a caller read and build.

use std::collections::{BTreeMap, HashMap};

use burn::module::ParamId;
use burn::optim::ModuleOptimizer;
use burn::store::burn_pack::{Reader, Scalar, Tensor as PackTensor, Writer};
use burn::tensor::Bytes;

/// The parameters of one model in module order: their ids, and their module paths (which
/// Burn's record keeps beside the state, to match parameter groups).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParamLayout {
    /// Ids in module order.
    pub ids: Vec<ParamId>,
    /// Module paths (`blocks.0.ff_in.weight`) in module order.
    pub paths: Vec<String>,
}

impl ParamLayout {
    /// The layout of `module`'s float parameters.
    pub fn of<M: burn::module::Module>(module: &M) -> Self {
        use burn::module::{ModuleVisitor, Param};
        use burn::prelude::Tensor;
        #[derive(Default)]
        struct Visit {
            stack: Vec<String>,
            layout: ParamLayout,
        }
        impl ModuleVisitor for Visit {
            fn enter_module(&mut self, name: &str, _: &str) {
                self.stack.push(name.to_string());
            }
            fn exit_module(&mut self, _: &str, _: &str) {
                self.stack.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                self.layout.ids.push(param.id);
                self.layout.paths.push(self.stack.join("."));
            }
        }
        let mut visit = Visit::default();
        module.visit(&mut visit);
        visit.layout
    }
}

/// Why a stacked optimizer state could not be split or joined.
#[derive(Debug, thiserror::Error)]
#[error("optimizer state of the seed group: {0}")]
pub struct OptimStackError(String);

fn error(message: impl Into<String>) -> OptimStackError {
    OptimStackError(message.into())
}

/// An optimizer record's tensors, scalars and metadata (parameter paths by id).
type RecordParts = (
    Vec<PackTensor>,
    Vec<(String, Scalar)>,
    BTreeMap<String, String>,
);

/// The record of `optim`, read back as tensors, scalars and metadata.
fn read(optim: &ModuleOptimizer) -> Result<RecordParts, OptimStackError> {
    let bytes = optim
        .into_bytes()
        .map_err(|e| error(format!("cannot serialise it: {e:?}")))?;
    let reader = Reader::from_bytes(bytes).map_err(|e| error(format!("{e:?}")))?;
    let scalars = reader
        .scalars()
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let metadata = reader.metadata().clone();
    let tensors = reader.into_tensors().map_err(|e| error(format!("{e:?}")))?;
    Ok((tensors, scalars, metadata))
}

/// `key` (`"{id}"` or `"{id}.{field}"`) as the id and the rest (`""` or `".{field}"`).
fn split_key(key: &str) -> Option<(u64, &str)> {
    let end = key.find('.').unwrap_or(key.len());
    Some((key[..end].parse().ok()?, &key[end..]))
}

/// A rank scalar moved by `delta` (the seed axis added or removed).
fn shift_rank(key_rest: &str, value: Scalar, delta: isize) -> Result<Scalar, OptimStackError> {
    if key_rest != ".__rank" {
        return Ok(value);
    }
    let rank = usize::try_from(value).map_err(|_| error("a parameter's rank is not a count"))?;
    let shifted = rank
        .checked_add_signed(delta)
        .ok_or_else(|| error("a stacked parameter has rank 0"))?;
    Ok(Scalar::from(shifted))
}

/// Seed by seed, the state `stack`'s optimizer holds for that seed, keyed by the seed's own
/// parameters (`seeds[s]`), loaded into a fresh optimizer from `fresh` (the one a run of the
/// seed alone uses, with its gradient clipping).
pub fn split(
    stack: &ModuleOptimizer,
    stack_layout: &ParamLayout,
    seeds: &[ParamLayout],
    fresh: impl Fn() -> ModuleOptimizer,
) -> Result<Vec<ModuleOptimizer>, OptimStackError> {
    let index: HashMap<u64, usize> = stack_layout
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.val(), i))
        .collect();
    let (tensors, scalars, _) = read(stack)?;
    let count = seeds.len();
    let mut parts: Vec<RecordParts> = (0..count).map(|_| Default::default()).collect();

    for tensor in tensors {
        let (name, dtype, shape, param_id, bytes) =
            tensor.into_parts().map_err(|e| error(format!("{e:?}")))?;
        let id = param_id.ok_or_else(|| error(format!("tensor {name} has no parameter id")))?;
        let i = *index.get(&id).ok_or_else(|| {
            error(format!(
                "tensor {name} belongs to no parameter of the stack"
            ))
        })?;
        let (_, rest) = split_key(&name).ok_or_else(|| error(format!("tensor name {name}")))?;
        let dims = shape.as_slice();
        if dims.first() != Some(&count) || bytes.len() % count != 0 {
            return Err(error(format!(
                "tensor {name} has shape {dims:?}, not one slice per seed ({count})"
            )));
        }
        let chunk = bytes.len() / count;
        for (s, part) in parts.iter_mut().enumerate() {
            let seed_id = seeds[s].ids[i].val();
            let slice = Bytes::from_bytes_vec(bytes[s * chunk..(s + 1) * chunk].to_vec());
            part.0.push(PackTensor::new(
                format!("{seed_id}{rest}"),
                dtype,
                dims[1..].to_vec(),
                Some(seed_id),
                slice,
            ));
        }
    }
    for (key, value) in scalars {
        let (id, rest) = split_key(&key).ok_or_else(|| error(format!("scalar {key}")))?;
        let i = *index
            .get(&id)
            .ok_or_else(|| error(format!("scalar {key} belongs to no parameter of the stack")))?;
        let value = shift_rank(rest, value, -1)?;
        for (s, part) in parts.iter_mut().enumerate() {
            let seed_id = seeds[s].ids[i].val();
            part.1.push((format!("{seed_id}{rest}"), value));
            part.2
                .insert(seed_id.to_string(), seeds[s].paths[i].clone());
        }
    }
    parts
        .into_iter()
        .map(|(tensors, scalars, metadata)| load(fresh(), tensors, scalars, metadata))
        .collect()
}

/// The stack's optimizer state joined from the seeds' (`optims[s]`, keyed by `seeds[s]`), in
/// a fresh optimizer from `fresh`. Every seed must be at the same optimizer step.
pub fn join(
    optims: &[&ModuleOptimizer],
    seeds: &[ParamLayout],
    stack_layout: &ParamLayout,
    fresh: impl Fn() -> ModuleOptimizer,
) -> Result<ModuleOptimizer, OptimStackError> {
    let count = optims.len();
    // Per seed: tensors by name, scalars by key, each keyed by (parameter index, rest).
    let mut tensors_by_seed = Vec::with_capacity(count);
    let mut scalars_by_seed = Vec::with_capacity(count);
    for (s, optim) in optims.iter().enumerate() {
        let index: HashMap<u64, usize> = seeds[s]
            .ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.val(), i))
            .collect();
        let (tensors, scalars, _) = read(optim)?;
        let tensors = tensors
            .into_iter()
            .map(|tensor| {
                let (name, dtype, shape, _, bytes) =
                    tensor.into_parts().map_err(|e| error(format!("{e:?}")))?;
                Ok((name, (dtype, shape.as_slice().to_vec(), bytes)))
            })
            .collect::<Result<Vec<_>, OptimStackError>>()?;
        let by_key = by_parameter(s, &index, "tensor", tensors)?;
        let scalar_by_key = by_parameter(s, &index, "scalar", scalars)?;
        tensors_by_seed.push(by_key);
        scalars_by_seed.push(scalar_by_key);
    }
    for s in 1..count {
        let keys = |m: &BTreeMap<(usize, String), _>| m.keys().cloned().collect::<Vec<_>>();
        if keys(&tensors_by_seed[s]) != keys(&tensors_by_seed[0])
            || scalars_by_seed[s] != scalars_by_seed[0]
        {
            return Err(error(format!(
                "seed {s}'s optimizer state is not at the same step as seed 0's"
            )));
        }
    }

    let mut tensors = Vec::new();
    for ((i, rest), (dtype, dims, bytes)) in std::mem::take(&mut tensors_by_seed[0]) {
        let stack_id = stack_layout.ids[i].val();
        let mut joined = bytes.to_vec();
        for seed in tensors_by_seed.iter_mut().skip(1) {
            let (_, seed_dims, seed_bytes) = seed
                .remove(&(i, rest.clone()))
                .expect("keys checked equal above");
            if seed_dims != dims {
                return Err(error(format!(
                    "parameter {} has shapes {dims:?} and {seed_dims:?} in two seeds",
                    stack_layout.paths[i]
                )));
            }
            joined.extend_from_slice(&seed_bytes);
        }
        let mut stacked_dims = vec![count];
        stacked_dims.extend(&dims);
        tensors.push(PackTensor::new(
            format!("{stack_id}{rest}"),
            dtype,
            stacked_dims,
            Some(stack_id),
            Bytes::from_bytes_vec(joined),
        ));
    }
    let mut scalars = Vec::new();
    let mut metadata = BTreeMap::new();
    for ((i, rest), value) in &scalars_by_seed[0] {
        let stack_id = stack_layout.ids[*i].val();
        scalars.push((format!("{stack_id}{rest}"), shift_rank(rest, *value, 1)?));
        metadata.insert(stack_id.to_string(), stack_layout.paths[*i].clone());
    }
    load(fresh(), tensors, scalars, metadata)
}

/// Seed `s`'s record items keyed by (index of their parameter in the seed's layout, the rest
/// of their key), `index` mapping parameter ids to those indices; `kind` names the items in
/// messages.
fn by_parameter<T>(
    s: usize,
    index: &HashMap<u64, usize>,
    kind: &str,
    items: impl IntoIterator<Item = (String, T)>,
) -> Result<BTreeMap<(usize, String), T>, OptimStackError> {
    let mut by_key = BTreeMap::new();
    for (key, item) in items {
        let (id, rest) = split_key(&key).ok_or_else(|| error(format!("{kind} {key}")))?;
        let i = *index.get(&id).ok_or_else(|| {
            error(format!(
                "seed {s}: {kind} {key} belongs to none of its parameters"
            ))
        })?;
        by_key.insert((i, rest.to_string()), item);
    }
    Ok(by_key)
}

/// `optim` with the state the tensors, scalars and metadata describe.
fn load(
    optim: ModuleOptimizer,
    tensors: Vec<PackTensor>,
    scalars: Vec<(String, Scalar)>,
    metadata: BTreeMap<String, String>,
) -> Result<ModuleOptimizer, OptimStackError> {
    let mut writer = Writer::new(tensors);
    for (key, value) in &scalars {
        writer = writer.with_scalar(key, *value);
    }
    for (key, value) in &metadata {
        writer = writer.with_metadata(key, value);
    }
    let bytes = writer
        .into_bytes()
        .map_err(|e| error(format!("cannot write it: {e:?}")))?;
    optim
        .from_bytes(bytes)
        .map_err(|e| error(format!("cannot load it: {e:?}")))
}
