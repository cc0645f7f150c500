//! GPUs shared by time-slicing: the device plugin advertises each GPU
//! several times and the pods on it share its memory with no limit per pod
//! (a MIG slice has its own). When they fill it, the next allocation fails
//! in whichever pod asks.

use crate::model::{Node, Sym};

use super::index::Index;
use super::node_issue::{IssueCode, NodeIssue};

/// A time-sliced GPU's memory nearly full: time-slicing shares the memory
/// with no limit per pod (unlike a MIG slice), so one pod's next allocation
/// fails with CUDA out-of-memory, or takes a neighbour's.
const SHARED_MEMORY_FULL: f64 = 0.9;

pub fn shared_memory_issue(index: &Index<'_>, node: &Node) -> Option<NodeIssue> {
    let replicas: u32 = node.label(crate::model::keys::GPU_REPLICAS)?.as_str().trim().parse().ok()?;
    if replicas <= 1 {
        return None;
    }
    let total_mib = |gpu: Sym| -> Option<u64> {
        index
            .snap
            .devices
            .get(&node.name)
            .and_then(|d| d.gpus.iter().find(|g| g.uuid == gpu).map(|g| g.memory_mib))
            .or_else(|| node.label(crate::model::keys::GPU_MEMORY).and_then(|m| m.as_str().parse().ok()))
    };
    let full: Vec<(u32, usize, String)> = index
        .snap
        .usage
        .iter()
        .filter(|((_, n), _)| *n == node.name)
        .flat_map(|(_, h)| h.devices.iter())
        .filter(|d| d.reading.slice.is_none() && d.reading.holders.len() >= 2)
        .filter_map(|d| {
            let used = d.reading.memory_used_mib?;
            let total = total_mib(d.reading.gpu.clone())?;
            (total > 0 && used as f64 >= SHARED_MEMORY_FULL * total as f64).then(|| {
                let use_ = format!("use {:.1} of {:.1} GiB", used as f64 / 1024.0, total as f64 / 1024.0);
                (d.reading.index, d.reading.holders.len(), use_)
            })
        })
        .collect();
    // GPUs alike read as one line: `GPUs 0, 1, 2: 4 pods each use 76.0 of 79.6 GiB`.
    let mut alike: Vec<(usize, String, Vec<u32>)> = Vec::new();
    for (gpu, pods, use_) in full {
        match alike.iter_mut().find(|(p, u, _)| *p == pods && *u == use_) {
            Some((_, _, gpus)) => gpus.push(gpu),
            None => alike.push((pods, use_, vec![gpu])),
        }
    }
    let full: Vec<String> = alike
        .into_iter()
        .map(|(pods, use_, gpus)| {
            let names = gpus.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(", ");
            format!(
                "GPU{} {names}: {pods} pods {}{use_}",
                if gpus.len() > 1 { "s" } else { "" },
                if gpus.len() > 1 { "each " } else { "" }
            )
        })
        .collect();
    (!full.is_empty()).then(|| NodeIssue {
        code: IssueCode::SharedMemoryFull,
        detail: format!(
            "{}; time-slicing limits no pod's memory: the next allocation fails in whichever pod asks (MIG slices isolate memory)",
            full.join("; ")
        ),
    })
}
