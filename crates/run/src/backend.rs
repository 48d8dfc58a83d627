//! The one place that turns a backend name into a Burn device. Burn 0.22 chooses backends
//! at run time, so flex, ndarray and wgpu live in one binary.
//!
//! wgpu is started once per process ([`BackendKind::device`]): the adapter wgpu picks is
//! checked for what headlab's kernels need before anything is written, and described
//! ([`WgpuAdapter`], with the language cubecl compiles the kernels to) so that a run says
//! where it ran, and a software driver (lavapipe, llvmpipe) is never taken for a GPU.
//!
//! The build has cubecl's WGSL compiler only. Burn's `vulkan` feature adds its SPIR-V one
//! (cooperative-matrix multiplies); measured on an H200 it was no faster, started slower, and
//! Debian 12's lavapipe crashes compiling its matrix multiply (docs/gpu.md, 2026-11-28).

use std::sync::OnceLock;

use burn::backend::DispatchDevice;
use burn::prelude::*;
use burn::tensor::wgpu::wgpu;
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

/// No device of the asked kind could be started, or the one wgpu found cannot run headlab.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "backend \"wgpu\" found no usable GPU adapter; run on the CPU with --backend flex, or \
     install a Vulkan driver (on Debian: apt-get install mesa-vulkan-drivers). wgpu said: \
     {reason}"
)]
pub struct NoAdapter {
    /// What wgpu said, or what the adapter lacks.
    pub reason: String,
}

/// The adapter wgpu picked: what its driver reports of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WgpuAdapter {
    /// The device's name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// The graphics API wgpu reached it through (`Vulkan`, `Metal`, `Dx12`, `Gl`).
    pub api: String,
    /// The language cubecl compiles headlab's kernels to on it: `WGSL` in this build
    /// (`SPIR-V` or `MSL` in a build with Burn's `vulkan` or `metal` feature).
    pub compiler: String,
    /// The driver's name and version, as the driver gives them (may be empty).
    pub driver: String,
    /// What kind of device: `discrete GPU`, `integrated GPU`, `virtual GPU`, `CPU` or `other`.
    pub device_type: String,
    /// Whether it is a software driver running on the CPU (lavapipe, llvmpipe, WARP): it
    /// works, but is many times slower than `--backend flex` and is never a GPU figure.
    pub software: bool,
}

impl WgpuAdapter {
    fn from_info(info: &wgpu::AdapterInfo, compiler: &str) -> Self {
        let device_type = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => "discrete GPU",
            wgpu::DeviceType::IntegratedGpu => "integrated GPU",
            wgpu::DeviceType::VirtualGpu => "virtual GPU",
            wgpu::DeviceType::Cpu => "CPU",
            wgpu::DeviceType::Other => "other",
        };
        let driver = [info.driver.trim(), info.driver_info.trim()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        WgpuAdapter {
            name: info.name.clone(),
            api: format!("{:?}", info.backend),
            compiler: compiler.to_string(),
            driver,
            device_type: device_type.to_string(),
            software: info.device_type == wgpu::DeviceType::Cpu,
        }
    }
}

impl std::fmt::Display for WgpuAdapter {
    /// `NVIDIA H200 (Vulkan, WGSL, discrete GPU, driver NVIDIA 580.159.04)`; a software
    /// adapter says so and what it costs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}, {}",
            self.name, self.api, self.compiler, self.device_type
        )?;
        if !self.driver.is_empty() {
            write!(f, ", driver {}", self.driver)?;
        }
        write!(f, ")")?;
        if self.software {
            write!(
                f,
                "; software: a CPU emulation of a GPU, many times slower than --backend flex"
            )?;
        }
        Ok(())
    }
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

    /// The device (without autodiff). wgpu is started the first time and checked (see
    /// [`wgpu_adapter`]), so that a missing or unsuitable adapter is an error here rather
    /// than a panic in the middle of training.
    pub fn device(self) -> Result<Device, NoAdapter> {
        match self {
            BackendKind::Flex => Ok(Device::flex()),
            #[allow(deprecated)] // still supported in 0.22, and the issue asks for it
            BackendKind::Ndarray => Ok(Device::ndarray()),
            BackendKind::Wgpu => started_wgpu().map(|(device, _)| device),
        }
    }
}

/// The adapter wgpu runs on, starting wgpu if this process has not yet: an error
/// when there is none, or when it lacks what headlab's kernels need.
pub fn wgpu_adapter() -> Result<WgpuAdapter, NoAdapter> {
    started_wgpu().map(|(_, adapter)| adapter)
}

/// wgpu's device and adapter, started once per process: Burn registers a runtime once, and
/// a second start of the same device is an error.
fn started_wgpu() -> Result<(Device, WgpuAdapter), NoAdapter> {
    static STARTED: OnceLock<Result<(Device, WgpuAdapter), NoAdapter>> = OnceLock::new();
    STARTED.get_or_init(start_wgpu).clone()
}

/// Starts Burn's wgpu runtime on the adapter `Device::wgpu(DefaultDevice)` would get (the
/// same selector, so Burn's default device is this one), checks the adapter and runs one
/// small op on it.
fn start_wgpu() -> Result<(Device, WgpuAdapter), NoAdapter> {
    let (device, setup) =
        quietly(|| Device::wgpu_options().init_with_setup())?.map_err(|e| NoAdapter {
            reason: e.to_string(),
        })?;
    let compiler = quietly(|| kernel_compiler(&device))?;
    let adapter = WgpuAdapter::from_info(&setup.adapter.get_info(), compiler);
    if let Some(missing) = missing_features(setup.adapter.features()) {
        return Err(NoAdapter {
            reason: format!(
                "the adapter it found, {} through {}, lacks {missing}, which headlab's \
                 kernels need (OpenGL adapters never have it; a Vulkan driver does)",
                adapter.name, adapter.api
            ),
        });
    }
    let sum = quietly(|| {
        Tensor::<1>::ones([4], &device)
            .sum()
            .into_data()
            .try_into_vec_as::<f32>()
            .map(|v| v[0])
    })?;
    match sum {
        Ok(4.0) => Ok((device, adapter)),
        Ok(sum) => Err(NoAdapter {
            reason: format!("on {adapter}, a test sum gave {sum} instead of 4"),
        }),
        Err(e) => Err(NoAdapter {
            reason: format!("on {adapter}, a test sum failed: {e:?}"),
        }),
    }
}

/// The language cubecl compiles kernels to on `device`, read from the name its runtime gives
/// itself (`wgpu<spirv>`, `wgpu<wgsl>`, `wgpu<msl>`): the same options cubecl chose its
/// compiler from, so a device that fell back to WGSL says so.
fn kernel_compiler(device: &Device) -> &'static str {
    let runtime = match device.as_dispatch() {
        DispatchDevice::Cube(cube) => cube.client().name(),
        _ => "",
    };
    compiler_of_runtime(runtime)
}

/// `SPIR-V`, `WGSL` or `MSL` for a cubecl runtime's name; `unknown` for any other.
fn compiler_of_runtime(runtime: &str) -> &'static str {
    match runtime {
        "wgpu<spirv>" => "SPIR-V",
        "wgpu<wgsl>" => "WGSL",
        "wgpu<msl>" => "MSL",
        _ => "unknown",
    }
}

/// What of headlab's needs `features` lacks, in words; `None` when it has them all. Burn's
/// autotuned reductions and backward passes add into f32 buffers atomically, so an adapter
/// without f32 atomic add fails in the middle of training ("Atomic add not supported").
fn missing_features(features: wgpu::Features) -> Option<&'static str> {
    (!features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC))
        .then_some("32-bit float atomic add (wgpu's SHADER_FLOAT32_ATOMIC)")
}

/// Runs `work` with the panic hook silenced, turning a panic (wgpu's way of saying "no
/// adapter" in some paths) into an error that carries its message.
fn quietly<T>(work: impl FnOnce() -> T) -> Result<T, NoAdapter> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    std::panic::set_hook(hook);
    result.map_err(|panic| NoAdapter {
        reason: panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the driver failed to start".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(device_type: wgpu::DeviceType) -> wgpu::AdapterInfo {
        let mut info = wgpu::AdapterInfo::new(device_type, wgpu::Backend::Vulkan);
        info.name = "llvmpipe (LLVM 15.0.6, 256 bits)".into();
        info.driver = "llvmpipe".into();
        info.driver_info = "Mesa 22.3.6".into();
        info
    }

    #[test]
    fn a_software_adapter_says_so() {
        let adapter = WgpuAdapter::from_info(&info(wgpu::DeviceType::Cpu), "WGSL");
        assert!(adapter.software);
        assert_eq!(
            adapter.to_string(),
            "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan, WGSL, CPU, driver llvmpipe Mesa 22.3.6); \
             software: a CPU emulation of a GPU, many times slower than --backend flex"
        );
    }

    #[test]
    fn a_gpu_is_named_without_the_software_warning() {
        let mut gpu = info(wgpu::DeviceType::DiscreteGpu);
        gpu.name = "NVIDIA H200".into();
        gpu.driver = "NVIDIA".into();
        gpu.driver_info = "580.159.04".into();
        let adapter = WgpuAdapter::from_info(&gpu, "WGSL");
        assert!(!adapter.software);
        assert_eq!(
            adapter.to_string(),
            "NVIDIA H200 (Vulkan, WGSL, discrete GPU, driver NVIDIA 580.159.04)"
        );
    }

    #[test]
    fn the_compiler_is_read_from_cubecls_runtime_name() {
        assert_eq!(compiler_of_runtime("wgpu<spirv>"), "SPIR-V");
        assert_eq!(compiler_of_runtime("wgpu<wgsl>"), "WGSL");
        assert_eq!(compiler_of_runtime("wgpu<msl>"), "MSL");
        assert_eq!(compiler_of_runtime("cuda"), "unknown");
    }

    #[test]
    fn an_adapter_without_float_atomics_is_refused() {
        assert!(missing_features(wgpu::Features::empty()).is_some());
        assert_eq!(
            missing_features(wgpu::Features::SHADER_FLOAT32_ATOMIC),
            None
        );
    }
}
