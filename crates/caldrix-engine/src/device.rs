//! Where a model's layers go: the GPU backends this build carries, the devices they found, and
//! what a load placed on one (issue 46). A member's lane is read from here, never from the flag
//! it was asked with.

use llama_cpp_2::{LlamaBackendDeviceType, list_llama_ggml_backend_devices};

/// The GPU backends compiled into this build (cargo features of the workspace).
pub const GPU_BACKENDS: &[&str] = &[
    #[cfg(feature = "vulkan")]
    "vulkan",
    #[cfg(feature = "cuda")]
    "cuda",
    #[cfg(feature = "metal")]
    "metal",
    #[cfg(feature = "rocm")]
    "rocm",
];

/// A device a GPU backend found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// ggml's name, e.g. `Vulkan0`, `CUDA0`.
    pub name: String,
    /// What the driver calls it, e.g. `NVIDIA H100 80GB HBM3`, `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub description: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
}

/// The devices a model's layers may be offloaded to (not the CPU backend's own).
pub fn gpu_devices() -> Vec<Device> {
    crate::model::backend();
    list_llama_ggml_backend_devices()
        .into_iter()
        .filter(|d| {
            matches!(
                d.device_type,
                LlamaBackendDeviceType::Gpu
                    | LlamaBackendDeviceType::IntegratedGpu
                    | LlamaBackendDeviceType::Accelerator
            ) && d.backend != "CPU"
                && d.backend != "BLAS"
        })
        .map(|d| Device {
            name: d.name,
            description: d.description,
            total_bytes: d.memory_total as u64,
            free_bytes: d.memory_free as u64,
        })
        .collect()
}

/// Why layers asked for cannot be offloaded: this build has no GPU backend, or its backends
/// found no device.
pub fn no_gpu_reason() -> String {
    if GPU_BACKENDS.is_empty() {
        "this caldrix is built for the CPU only (build it with `--features vulkan`, `cuda`, \
         `metal` or `rocm`)"
            .to_owned()
    } else {
        format!(
            "the {} backend is built in but found no usable device (is the driver installed? \
             Vulkan lists a software device only with GGML_VK_VISIBLE_DEVICES)",
            GPU_BACKENDS.join(", ")
        )
    }
}

/// What a load placed on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The device holding the offloaded layers (the first GPU device), when any are.
    pub device: Option<Device>,
    /// Layers offloaded: llama.cpp offloads the last `n` repeating layers and, when asked for
    /// more than it has, the output layer too, so at most the model's layers plus one.
    pub layers: u32,
    /// The model's layers plus the output layer (what "every layer" is).
    pub total_layers: u32,
}

impl Placement {
    pub fn on_gpu(&self) -> bool {
        self.device.is_some() && self.layers > 0
    }
}
