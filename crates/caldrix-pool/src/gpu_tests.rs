//! The pool on a device (the Vulkan build; in CI Mesa's lavapipe, listed with
//! `GGML_VK_VISIBLE_DEVICES=0`): `members` says `gpu` with the device only for a member whose
//! layers went there, and a device's weights are not charged to system memory.

use crate::{MemberConfig, Pool, PoolConfig};

#[test]
fn members_report_the_device_only_for_layers_that_went_to_it() {
    let device = caldrix_engine::device::gpu_devices().into_iter().next().expect("a device");
    let pool = Pool::new(PoolConfig {
        frames: caldrix_proto::FrameFormat::Cbor,
        max_connections: 4,
        idle_timeout: None,
        context_budget: 0,
        memory_limit: 4 << 30,
        owner_uid: 0,
    });
    let model = test_models::smollm2();
    let file = std::fs::metadata(&model).unwrap().len();
    let member = |alias: &str, gpu_layers| MemberConfig {
        window: Some(1024),
        threads: Some(2),
        gpu_layers,
        ..MemberConfig::new(alias, model.display().to_string(), model.clone())
    };
    pool.load(member("auto", None)).unwrap();
    pool.load(member("cpu", Some(0))).unwrap();
    let infos = pool.member_infos().unwrap();
    let info = |alias: &str| infos.iter().find(|m| m.alias == alias).unwrap().clone();

    let auto = info("auto");
    assert_eq!(auto.lane, Some(caldrix_proto::Lane::Gpu));
    let gpu = auto.gpu.expect("where the layers went");
    assert_eq!(
        (gpu.device.as_str(), gpu.description.as_str()),
        (&*device.name, &*device.description)
    );
    assert_eq!(gpu.layers, gpu.total_layers, "every layer of SmolLM2 fits: {gpu:?}");
    assert!(gpu.member_bytes > 50 << 20 && gpu.total_bytes >= gpu.free_bytes, "{gpu:?}");
    assert!(auto.footprint_bytes < file, "the device's weights are not the system's");

    let cpu = info("cpu");
    assert_eq!((cpu.lane, cpu.gpu), (Some(caldrix_proto::Lane::Cpu), None));
    assert_eq!(cpu.footprint_bytes, file);
}
