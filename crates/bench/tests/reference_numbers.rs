//! The PyTorch reference is headlab's model: given headlab's initial weights and batches, it
//! computes headlab's logits, and after three training steps (loss, backward, per-parameter
//! clipping, AdamW) the same losses and logits, to float rounding.
//!
//! Needs torch: runs where the interpreter in HEADLAB_PYTHON (default python3) can import
//! it, and passes with a note everywhere else (CI has no torch).

use std::process::Command;

use bench::case::{Size, resolve};
use bench::pytorch;
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use model::Encoder;
use run::BackendKind;
use serde_json::{Value, json};
use tasks::batch::{Batch, training_examples};
use train::step::{StepGradients, step_gradients};

/// Every parameter's shape and values, in module order.
struct Dump(Vec<Value>);

impl ModuleVisitor for Dump {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let shape = value.dims().to_vec();
        let values: Vec<f32> = value.into_data().try_to_vec().expect("f32 parameters");
        self.0.push(json!({ "shape": shape, "values": values }));
    }
}

fn floats(tensor: Tensor<3>) -> Vec<f32> {
    tensor.into_data().try_to_vec().expect("f32 logits")
}

#[test]
fn the_pytorch_reference_computes_headlabs_numbers() {
    let python = pytorch::python_from_env();
    if let Err(reason) = pytorch::probe(&python, pytorch::TorchDevice::Cpu) {
        eprintln!(
            "skipped: {}",
            pytorch::unavailable_message(&python, &reason)
        );
        return;
    }
    let run = resolve(Size::Small.run_config(BackendKind::Flex)).unwrap();
    let config = &run.config;
    let plain = BackendKind::Flex.device().unwrap();
    let device = plain.clone().autodiff();
    device.seed(config.seed);
    let mut model = config.model.init(&run.io, &device).unwrap();
    let mut dump = Dump(Vec::new());
    model.visit(&mut dump);

    let steps: Vec<_> = (0..3)
        .map(|step| training_examples(&run.task, config.seed, step, config.train.batch_size))
        .collect();
    let tokens = Batch::new(&steps[0], &plain).tokens;
    let logits_before = floats(model.valid().forward(tokens.clone()));
    let mut optim = train::trainer::optimizer(config);
    let mut losses = Vec::new();
    for examples in &steps {
        let forward = |model: &Encoder, batch: &Batch| model.forward(batch.tokens.clone());
        let StepGradients { grads, loss } =
            step_gradients(&model, forward, examples, 1, false, &device);
        losses.push(loss.into_scalar::<f32>());
        model = optim.step(config.train.lr, model, grads);
    }
    let logits_after = floats(model.valid().forward(tokens));

    let data = json!({
        "vocab": run.io.vocab_size,
        "seq_len": run.task.seq_len(),
        "parameters": dump.0,
        "steps": steps
            .iter()
            .map(|examples| examples.iter().map(|e| e.input.clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        "logits_before": logits_before,
        "logits_after": logits_after,
        "losses": losses,
    });
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("headlab.json");
    std::fs::write(&file, data.to_string()).unwrap();

    let output = Command::new(&python)
        .arg(pytorch::script_path().unwrap())
        .args(["--size", "small", "--threads", "1", "--check"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = pytorch::parse_output(&stdout).unwrap();
    eprintln!("{result}");
    assert_eq!(result["parameters"], model.num_params());
    let at_most = |key: &str, bound: f64| {
        let value = result[key].as_f64().unwrap();
        assert!(value <= bound, "{key} = {value} > {bound}: {result}");
    };
    at_most("max_abs_logits_before", 1e-4);
    at_most("max_abs_loss", 1e-4);
    at_most("max_abs_logits_after", 1e-3);
}
