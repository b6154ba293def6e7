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

/// The dynamic-backends build: ggml's backends are libraries beside the executable (a CPU
/// backend per instruction-set level, the best one the CPU runs picked now, and a GPU backend
/// when one was put there), else in the directory the build wrote them to. Never from the
/// working directory, which a repository controls.
#[cfg(feature = "dynamic-backends")]
pub(crate) fn load_backends() {
    let beside = std::env::current_exe().ok().and_then(|exe| {
        let dir = exe.parent()?.to_owned();
        let has_backends = std::fs::read_dir(&dir).ok()?.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("libggml-cpu") && n.contains(".so"))
        });
        has_backends.then_some(dir)
    });
    match beside {
        Some(dir) => llama_cpp_2::llama_backend::load_backends_from_path(&dir),
        None => llama_cpp_2::llama_backend::load_backends(),
    }
}

/// Whether this build may find a GPU device at all: one compiled in, or loaded at run time.
pub fn may_have_gpu() -> bool {
    !GPU_BACKENDS.is_empty() || cfg!(feature = "dynamic-backends")
}

/// A device a GPU backend found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// ggml's index of the device (what a load pins its layers to).
    pub index: usize,
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
            index: d.index,
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
    if cfg!(feature = "dynamic-backends") && GPU_BACKENDS.is_empty() {
        "no GPU backend library was loaded (put libggml-cuda.so or libggml-vulkan.so, built from \
         the same llama.cpp, beside caldrix) or it found no device"
            .to_owned()
    } else if GPU_BACKENDS.is_empty() {
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

/// What a load places on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The device holding the offloaded layers (the first GPU device), when any are.
    pub device: Option<Device>,
    /// Layers offloaded: llama.cpp offloads the last `n` repeating layers and, when asked for
    /// more than it has, the output layer too, so at most the model's layers plus one.
    pub layers: u32,
    /// The model's layers plus the output layer (what "every layer" is).
    pub total_layers: u32,
    /// Bytes the device holds for them: their weights and their KV rows.
    pub device_bytes: u64,
    /// Of those, the weights (the rest of the file stays in system memory).
    pub device_weight_bytes: u64,
}

impl Placement {
    pub fn on_gpu(&self) -> bool {
        self.device.is_some() && self.layers > 0
    }

    /// Where the layers went, for a person: `CPU` or `GPU Vulkan0 (llvmpipe …), 31 of 31 layers`.
    pub fn describe(&self) -> String {
        match &self.device {
            Some(d) if self.layers > 0 => format!(
                "GPU {} ({}), {} of {} layers, {} MiB of its {} MiB",
                d.name,
                d.description,
                self.layers,
                self.total_layers,
                self.device_bytes >> 20,
                d.total_bytes >> 20
            ),
            _ => "CPU".to_owned(),
        }
    }
}

/// Kept free on a device beyond the layers' weights and KV rows: llama.cpp's compute buffers
/// (a few hundred MiB at the default batch for models up to 8B) and the driver's own.
pub const DEVICE_HEADROOM_BYTES: u64 = 512 << 20;

/// How many layers a load offloads: `None` is "auto" (as many as fit the device's free
/// memory, none when there is no usable device), `Some(n)` exactly `n` (refused when no
/// device can take them).
pub type GpuLayers = Option<u32>;

/// Why layers cannot be placed as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    #[error("{layers} layers were asked for on a GPU, but {why}")]
    NoGpu { layers: u32, why: String },
    #[error(
        "{layers} of {total} layers on {device} ({description}) need {need} MiB (weights {weights} \
         MiB + KV rows of a {rows}-row window {kv} MiB + {headroom} MiB for compute) but the \
         device has {free} MiB free of {device_total} MiB; ask for fewer layers or leave \
         --gpu-layers out to offload what fits"
    )]
    DeviceTooSmall {
        layers: u32,
        total: u32,
        device: String,
        description: String,
        need: u64,
        weights: u64,
        kv: u64,
        headroom: u64,
        rows: u32,
        free: u64,
        device_total: u64,
    },
}

/// Places a model of `shape` on the first of `devices`: `asked` layers (see [`GpuLayers`]),
/// each holding `rows` KV rows. Pure, so the rule is tested without a device.
pub fn place(
    shape: &crate::gguf::Shape,
    asked: GpuLayers,
    rows: u32,
    devices: &[Device],
) -> Result<Placement, PlaceError> {
    let n_layer = shape
        .block_count
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(shape.layer_bytes.len() as u32);
    let total_layers = n_layer.saturating_add(1);
    let cpu = Placement {
        device: None,
        layers: 0,
        total_layers,
        device_bytes: 0,
        device_weight_bytes: 0,
    };
    let device = match (asked, devices.first()) {
        (Some(0), _) | (None, None) => return Ok(cpu),
        (Some(layers), None) => return Err(PlaceError::NoGpu { layers, why: no_gpu_reason() }),
        (_, Some(device)) => device,
    };
    let kv_row = shape.kv_row_bytes_per_layer().unwrap_or(0);
    // llama.cpp offloads the last `n` repeating layers, then the output layer.
    let weights = |n: u32| -> u64 {
        let repeating = n.min(n_layer) as usize;
        let last: u64 = shape.layer_bytes.iter().rev().take(repeating).sum();
        last + if n > n_layer { shape.output_bytes } else { 0 }
    };
    let kv = |n: u32| u64::from(n.min(n_layer)) * u64::from(rows) * kv_row;
    let need = |n: u32| weights(n) + kv(n) + DEVICE_HEADROOM_BYTES;
    let layers = match asked {
        Some(n) => {
            let n = n.min(total_layers);
            if need(n) > device.free_bytes {
                return Err(PlaceError::DeviceTooSmall {
                    layers: n,
                    total: total_layers,
                    device: device.name.clone(),
                    description: device.description.clone(),
                    need: need(n) >> 20,
                    weights: weights(n) >> 20,
                    kv: kv(n) >> 20,
                    headroom: DEVICE_HEADROOM_BYTES >> 20,
                    rows,
                    free: device.free_bytes >> 20,
                    device_total: device.total_bytes >> 20,
                });
            }
            n
        }
        None => (1..=total_layers).rev().find(|&n| need(n) <= device.free_bytes).unwrap_or(0),
    };
    if layers == 0 {
        return Ok(cpu);
    }
    Ok(Placement {
        device: Some(device.clone()),
        layers,
        total_layers,
        device_bytes: weights(layers) + kv(layers),
        device_weight_bytes: weights(layers),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Shape;

    const MIB: u64 = 1 << 20;

    fn shape() -> Shape {
        Shape {
            block_count: Some(4),
            layer_bytes: vec![100 * MIB; 4],
            output_bytes: 50 * MIB,
            embedding_length: Some(512),
            head_count: Some(8),
            head_count_kv: Some(2),
            key_length: None,
            value_length: None,
        }
    }

    fn device(free: u64) -> Device {
        Device {
            index: 1,
            name: "Vulkan0".into(),
            description: "a card".into(),
            total_bytes: 8192 * MIB,
            free_bytes: free,
        }
    }

    #[test]
    fn a_kv_row_counts_the_kv_heads_keys_and_values_in_f16() {
        // 2 KV heads of 64 dimensions, keys and values, 2 bytes each.
        assert_eq!(shape().kv_row_bytes_per_layer(), Some(2 * (64 + 64) * 2));
    }

    #[test]
    fn auto_offloads_what_fits_and_none_without_a_device() {
        let s = shape();
        let rows = 4096; // 4096 rows x 512 bytes = 2 MiB of KV a layer
        assert_eq!(place(&s, None, rows, &[]).unwrap().layers, 0);
        let all = place(&s, None, rows, &[device(8192 * MIB)]).unwrap();
        assert_eq!((all.layers, all.total_layers), (5, 5));
        assert_eq!(all.device_weight_bytes, 450 * MIB);
        assert_eq!(all.device_bytes, 450 * MIB + 8 * MIB);
        // Room for two layers and their rows after the headroom, not the third.
        let two = place(&s, None, rows, &[device(512 * MIB + 204 * MIB + 50 * MIB)]).unwrap();
        assert_eq!(two.layers, 2);
        assert!(two.on_gpu());
        let none = place(&s, None, rows, &[device(600 * MIB)]).unwrap();
        assert!(!none.on_gpu(), "{none:?}");
        assert_eq!(none.describe(), "CPU");
    }

    #[test]
    fn an_explicit_count_that_does_not_fit_is_refused_with_the_figures() {
        let err = place(&shape(), Some(4), 4096, &[device(700 * MIB)]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("4 of 5 layers on Vulkan0 (a card) need 920 MiB"), "{text}");
        assert!(text.contains("weights 400 MiB + KV rows of a 4096-row window 8 MiB"), "{text}");
        assert!(text.contains("700 MiB free of 8192 MiB"), "{text}");
        // Asked past the model's layers: every layer, the output layer included.
        let all = place(&shape(), Some(99), 4096, &[device(8192 * MIB)]).unwrap();
        assert_eq!(all.layers, 5);
    }

    #[test]
    fn layers_asked_for_with_no_device_name_the_missing_backend_and_zero_is_the_cpu() {
        let err = place(&shape(), Some(8), 4096, &[]).unwrap_err();
        assert!(matches!(err, PlaceError::NoGpu { layers: 8, .. }), "{err}");
        let cpu = place(&shape(), Some(0), 4096, &[device(8192 * MIB)]).unwrap();
        assert_eq!(cpu.layers, 0);
        assert!(cpu.device.is_none());
    }
}
