//! The one place that turns a backend name into a Burn device. Burn 0.22 chooses backends
//! at run time, so flex, ndarray and wgpu live in one binary.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

/// Where tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// Burn's portable CPU backend (the default).
    #[default]
    Flex,
    /// The ndarray CPU backend.
    Ndarray,
    /// A GPU through wgpu (Vulkan, Metal, DX12); a software Vulkan driver also works.
    Wgpu,
}

/// No device of the asked kind could be started.
#[derive(Debug, thiserror::Error)]
#[error(
    "backend \"wgpu\" found no usable GPU adapter; run on the CPU with --backend flex, or \
     install a Vulkan driver (on Debian: apt-get install mesa-vulkan-drivers). wgpu said: \
     {reason}"
)]
pub struct NoAdapter {
    /// What wgpu said.
    pub reason: String,
}

impl BackendKind {
    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Flex => "flex",
            BackendKind::Ndarray => "ndarray",
            BackendKind::Wgpu => "wgpu",
        }
    }

    /// Whether results are bitwise reproducible for a fixed seed.
    pub fn is_deterministic(self) -> bool {
        self != BackendKind::Wgpu
    }

    /// The device (without autodiff). For wgpu, a tiny operation is run first so that a
    /// missing adapter is an error here rather than a panic in the middle of training.
    pub fn device(self) -> Result<Device, NoAdapter> {
        match self {
            BackendKind::Flex => Ok(Device::flex()),
            #[allow(deprecated)] // still supported in 0.22, and the issue asks for it
            BackendKind::Ndarray => Ok(Device::ndarray()),
            BackendKind::Wgpu => {
                let device = Device::wgpu(DeviceKind::DefaultDevice);
                probe(&device).map(|()| device)
            }
        }
    }
}

/// Runs one small op on `device`, turning a panic (wgpu's way of saying "no adapter") into
/// an error. The panic hook is silenced meanwhile so the user sees one clear message.
fn probe(device: &Device) -> Result<(), NoAdapter> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| {
        Tensor::<1>::ones([4], device)
            .sum()
            .into_data()
            .try_into_vec_as::<f32>()
            .map(|v| v[0])
    });
    std::panic::set_hook(hook);
    match result {
        Ok(Ok(4.0)) => Ok(()),
        Ok(Ok(sum)) => Err(NoAdapter {
            reason: format!("a test sum gave {sum} instead of 4"),
        }),
        Ok(Err(e)) => Err(NoAdapter {
            reason: format!("{e:?}"),
        }),
        Err(panic) => Err(NoAdapter {
            reason: panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the driver failed to start".into()),
        }),
    }
}
