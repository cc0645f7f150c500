//! The NVML backend: read-only queries through nvml-wrapper, which loads
//! `libnvidia-ml.so.1` at run time (so kgpu builds and runs without a GPU;
//! the agent then reports NVML as unavailable, with the reason).
//!
//! Nothing here changes a GPU's settings: no MIG mode, no clocks, no
//! persistence mode. Where the safe wrapper has no call (GPU-instance
//! placements), `mig_placements` makes the read-only NVML calls itself.

use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause, TemperatureSensor};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::event::EventSet;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_FAILURE, NVML_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_UNC,
};

use super::backend::{GpuBackend, Reading, XidSeen};
use super::wire::{Ecc, GpuReport, Mig, MigInstanceReport, Placement, RemappedRows, RetiredPages};

/// NVLinks a GPU may have (NVML_NVLINK_MAX_LINKS).
const MAX_NVLINKS: u32 = 18;

pub struct NvmlBackend {
    /// `Err`: why NVML cannot be used on this node.
    nvml: Result<&'static Nvml, String>,
    /// Registered for critical XIDs on every GPU that supports them.
    events: Option<EventSet<'static>>,
}

impl NvmlBackend {
    pub fn new() -> NvmlBackend {
        // The agent runs NVML for its whole life: leaking the handle gives
        // the event set the 'static borrow its thread needs.
        let nvml = Nvml::init().map(|n| &*Box::leak(Box::new(n))).map_err(describe_init_error);
        let events = nvml.as_ref().ok().and_then(|n| register_xids(n).ok());
        NvmlBackend { nvml, events }
    }
}

impl Default for NvmlBackend {
    fn default() -> Self {
        NvmlBackend::new()
    }
}

fn describe_init_error(e: NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(e) => {
            format!(
                "NVML not found ({e}): no NVIDIA driver on this node, or libnvidia-ml.so.1 not mounted into the agent"
            )
        }
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => "no permission to use NVML (run the agent privileged, or with /dev/nvidia*)".into(),
        other => format!("NVML failed to start: {other}"),
    }
}

fn register_xids(nvml: &'static Nvml) -> Result<EventSet<'static>, NvmlError> {
    let mut set = nvml.create_event_set()?;
    for i in 0..nvml.device_count()? {
        let device = nvml.device_by_index(i)?;
        let Ok(supported) = device.supported_event_types() else { continue };
        if !supported.contains(EventTypes::CRITICAL_XID_ERROR) {
            continue;
        }
        // register_events consumes the set and releases it on error.
        set = device.register_events(EventTypes::CRITICAL_XID_ERROR, set).map_err(|e| e.error)?;
    }
    Ok(set)
}

/// `Ok(None)` for what a GPU does not support; other errors end the reading.
fn optional<T>(r: Result<T, NvmlError>) -> Result<Option<T>, NvmlError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::NotSupported | NvmlError::NoPermission | NvmlError::FunctionNotFound) => Ok(None),
        Err(NvmlError::FailedToLoadSymbol(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

impl GpuBackend for NvmlBackend {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn read(&mut self) -> Result<Reading, String> {
        let nvml = self.nvml.clone()?;
        read_all(nvml).map_err(|e| format!("NVML: {e}"))
    }

    fn wait_xids(&mut self, timeout: Duration) -> Vec<XidSeen> {
        let Some(set) = &self.events else {
            std::thread::sleep(timeout);
            return Vec::new();
        };
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        match set.wait(ms) {
            Ok(event) => match (event.event_data, event.device.uuid()) {
                (Some(XidError::Value(code)), Ok(gpu)) => {
                    vec![XidSeen { gpu, code: u32::try_from(code).unwrap_or(u32::MAX) }]
                }
                _ => Vec::new(),
            },
            Err(NvmlError::Timeout) => Vec::new(),
            Err(e) => {
                tracing::warn!("NVML event wait failed ({e}); XIDs are not watched any more");
                self.events = None;
                Vec::new()
            }
        }
    }
}

fn read_all(nvml: &Nvml) -> Result<Reading, NvmlError> {
    let driver_version = optional(nvml.sys_driver_version())?;
    let cuda_driver_version = optional(nvml.sys_cuda_driver_version())?.map(|v| {
        format!("{}.{}", nvml_wrapper::cuda_driver_version_major(v), nvml_wrapper::cuda_driver_version_minor(v))
    });
    let mut gpus = Vec::new();
    for i in 0..nvml.device_count()? {
        let d = nvml.device_by_index(i)?;
        let memory = optional(d.memory_info())?;
        let mut gpu = GpuReport {
            index: optional(d.index())?.unwrap_or(i),
            uuid: d.uuid()?,
            name: optional(d.name())?.unwrap_or_default(),
            pci_bus_id: optional(d.pci_info())?.map(|p| p.bus_id),
            memory_total_mib: memory.as_ref().map_or(0, |m| m.total / (1 << 20)),
            memory_used_mib: memory.as_ref().map_or(0, |m| m.used / (1 << 20)),
            utilization_pct: optional(d.utilization_rates())?.map(|u| u.gpu),
            temperature_c: optional(d.temperature(TemperatureSensor::Gpu))?,
            power_w: optional(d.power_usage())?.map(|mw| f64::from(mw) / 1000.0),
            health: "healthy".into(),
            ..GpuReport::default()
        };
        if let Some(mode) = optional(d.is_ecc_enabled())? {
            let count = |e, c| optional(d.total_ecc_errors(e, c)).map(Option::unwrap_or_default);
            gpu.ecc = Some(Ecc {
                enabled: mode.currently_enabled,
                pending_enabled: mode.pending_enabled,
                corrected_volatile: count(MemoryError::Corrected, EccCounter::Volatile)?,
                uncorrected_volatile: count(MemoryError::Uncorrected, EccCounter::Volatile)?,
                corrected_aggregate: count(MemoryError::Corrected, EccCounter::Aggregate)?,
                uncorrected_aggregate: count(MemoryError::Uncorrected, EccCounter::Aggregate)?,
            });
        }
        let sbe = optional(d.retired_pages(RetirementCause::MultipleSingleBitEccErrors))?;
        let dbe = optional(d.retired_pages(RetirementCause::DoubleBitEccError))?;
        let pending = optional(d.are_pages_pending_retired())?;
        if sbe.is_some() || dbe.is_some() || pending.is_some() {
            gpu.retired_pages = Some(RetiredPages {
                single_bit: sbe.map_or(0, |v| v.len() as u64),
                double_bit: dbe.map_or(0, |v| v.len() as u64),
                pending: pending.unwrap_or(false),
            });
        }
        gpu.remapped_rows = remapped_rows(&d);
        gpu.mig = mig(nvml, &d)?;
        gpu.nvlinks_active = (0..MAX_NVLINKS)
            .map_while(|link| match d.link_wrapper_for(link).is_active() {
                Ok(active) => Some((link, active)),
                Err(_) => None,
            })
            .filter_map(|(link, active)| active.then_some(link))
            .collect();
        gpus.push(gpu);
    }
    Ok(Reading { driver_version, cuda_driver_version, gpus })
}

/// Row remapping (A100 and newer), read through NVML field values.
fn remapped_rows(d: &nvml_wrapper::Device<'_>) -> Option<RemappedRows> {
    use nvml_wrapper::enums::device::SampleValue;
    let ids = [
        NVML_FI_DEV_REMAPPED_COR,
        NVML_FI_DEV_REMAPPED_UNC,
        NVML_FI_DEV_REMAPPED_PENDING,
        NVML_FI_DEV_REMAPPED_FAILURE,
    ];
    let samples = d.field_values_for(&ids.map(FieldId)).ok()?;
    let mut values = [0u64; 4];
    for (slot, sample) in values.iter_mut().zip(samples) {
        *slot = match sample.ok()?.value.ok()? {
            SampleValue::U32(v) => u64::from(v),
            SampleValue::U64(v) => v,
            SampleValue::I64(v) => u64::try_from(v).unwrap_or(0),
            SampleValue::F64(v) => v as u64,
        };
    }
    Some(RemappedRows {
        correctable: values[0],
        uncorrectable: values[1],
        pending: values[2] != 0,
        failure: values[3] != 0,
    })
}

fn mig(nvml: &Nvml, d: &nvml_wrapper::Device<'_>) -> Result<Option<Mig>, NvmlError> {
    let Some(mode) = optional(d.mig_mode())? else { return Ok(None) };
    let enabled = mode.current == 1;
    let mut mig = Mig { enabled, pending_enabled: mode.pending == 1, instances: Vec::new() };
    if !enabled {
        return Ok(Some(mig));
    }
    let placements = mig_placements::of(nvml, d);
    for j in 0..d.mig_device_count()? {
        let md = match d.mig_device_by_index(j) {
            Ok(md) => md,
            // Empty slots of the GPU's maximum.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) => return Err(e),
        };
        let name = optional(md.name())?.unwrap_or_default();
        let gi = mig_placements::gpu_instance_id(nvml, &md);
        mig.instances.push(MigInstanceReport {
            // "NVIDIA H100 80GB HBM3 MIG 3g.40gb" → "3g.40gb"
            profile: name.rsplit("MIG ").next().unwrap_or(&name).trim().to_string(),
            gpu_instance_id: gi,
            placement: gi.and_then(|id| placements.get(&id).copied()),
            uuid: optional(md.uuid())?,
            memory_mib: optional(md.memory_info())?.map_or(0, |m| m.total / (1 << 20)),
        });
    }
    mig.instances.sort_by_key(|i| (i.placement.map(|p| p.start), i.gpu_instance_id));
    Ok(Some(mig))
}

/// GPU-instance ids and placements, which nvml-wrapper does not expose:
/// read-only NVML calls made directly. Every call checks that the driver
/// has the symbol first (the sys bindings would panic otherwise).
#[allow(unsafe_code)]
mod mig_placements {
    use std::collections::HashMap;

    use nvml_wrapper::Nvml;
    use nvml_wrapper_sys::bindings::{
        NVML_GPU_INSTANCE_PROFILE_COUNT, nvmlGpuInstance_t, nvmlGpuInstanceInfo_t, nvmlGpuInstanceProfileInfo_t,
        nvmlReturn_enum_NVML_SUCCESS,
    };

    use super::Placement;

    /// GPU-instance id → placement, for every instance on the GPU.
    pub fn of(nvml: &Nvml, device: &nvml_wrapper::Device<'_>) -> HashMap<u32, Placement> {
        let lib = nvml.lib();
        let mut out = HashMap::new();
        if lib.nvmlDeviceGetGpuInstanceProfileInfo.is_err()
            || lib.nvmlDeviceGetGpuInstances.is_err()
            || lib.nvmlGpuInstanceGetInfo.is_err()
        {
            return out;
        }
        // SAFETY: the handle comes from a live `Device`, which borrows the
        // `Nvml` that stays initialised for the agent's life; it is only
        // passed to NVML's own read-only queries below.
        let handle = unsafe { device.handle() };
        for profile in 0..NVML_GPU_INSTANCE_PROFILE_COUNT {
            // SAFETY: `info` is a plain C struct NVML fills; zeroed is a valid value for it.
            let mut info: nvmlGpuInstanceProfileInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: the symbol was checked above; `info` is a valid, writable out-pointer.
            let rc = unsafe { lib.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile, &mut info) };
            if rc != nvmlReturn_enum_NVML_SUCCESS || info.instanceCount == 0 {
                continue;
            }
            let mut instances: Vec<nvmlGpuInstance_t> = vec![std::ptr::null_mut(); info.instanceCount as usize];
            let mut count: u32 = 0;
            // SAFETY: `instances` has room for the profile's maximum instance count, as NVML requires.
            let rc = unsafe { lib.nvmlDeviceGetGpuInstances(handle, info.id, instances.as_mut_ptr(), &mut count) };
            if rc != nvmlReturn_enum_NVML_SUCCESS {
                continue;
            }
            for gi in instances.into_iter().take(count as usize) {
                // SAFETY: as above, a zeroed C struct to be filled.
                let mut gi_info: nvmlGpuInstanceInfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: `gi` is a handle NVML just returned for this device.
                let rc = unsafe { lib.nvmlGpuInstanceGetInfo(gi, &mut gi_info) };
                if rc == nvmlReturn_enum_NVML_SUCCESS {
                    out.insert(gi_info.id, Placement { start: gi_info.placement.start, size: gi_info.placement.size });
                }
            }
        }
        out
    }

    /// The GPU-instance id of a MIG device handle.
    pub fn gpu_instance_id(nvml: &Nvml, mig_device: &nvml_wrapper::Device<'_>) -> Option<u32> {
        let lib = nvml.lib();
        lib.nvmlDeviceGetGpuInstanceId.as_ref().ok()?;
        let mut id: u32 = 0;
        // SAFETY: a live MIG device handle and a valid out-pointer; the symbol was checked.
        let rc = unsafe { lib.nvmlDeviceGetGpuInstanceId(mig_device.handle(), &mut id) };
        (rc == nvmlReturn_enum_NVML_SUCCESS).then_some(id)
    }
}
