//! The driver × CUDA matrix: every driver version the fleet runs against
//! every CUDA need its GPU pods declare, with the verdict of each cell.

use std::collections::{BTreeMap, HashMap};

use super::super::index::Index;
use super::{Need, NodeFacts, Verdict, need_of, node_facts_in, verdict};
use crate::model::{CudaNeed, CudaVersion, DriverVersion, Pod, PodKey, Sym, Timestamp};

/// How many pods, and the first few by name: a detail view lists a screenful,
/// and naming all of 100,000 pods costs more than the rest of the matrix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    pub count: usize,
    pub first: Vec<PodKey>,
}

impl Sample {
    pub const KEPT: usize = 60;

    fn add(&mut self, pod: &Pod) {
        self.count += 1;
        if self.first.len() < Sample::KEPT {
            self.first.push(pod.key());
        }
    }
}

/// A matrix cell: one driver version × one CUDA need.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub driver: String,
    pub nodes: Vec<Sym>,
    pub cuda: String,
    /// GPU pods with this need, anywhere.
    pub workloads: Sample,
    /// Those of them placed on nodes with this driver.
    pub placed: Sample,
    pub verdict: Verdict,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Matrix {
    /// Driver versions (rows) with their nodes; `unknown` last.
    pub drivers: Vec<(String, Vec<Sym>)>,
    /// CUDA needs (columns) with their workloads.
    pub needs: Vec<(String, Sample)>,
    pub cells: Vec<Cell>,
    /// GPU pods that say nothing about CUDA.
    pub unknown_need: usize,
}

impl Matrix {
    pub fn cell(&self, driver: &str, cuda: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.driver == driver && c.cuda == cuda)
    }
}

/// A workload and the matrix row (driver) of its node, if placed.
type RowAndPod<'a> = (Option<usize>, &'a Pod);

/// Driver versions × CUDA needs over the unfinished GPU pods of the index.
pub fn matrix(index: &Index<'_>, now: Timestamp) -> Matrix {
    let all = index.node_list();
    // (driver, its label) → positions of its nodes
    let mut by_driver: BTreeMap<(Option<DriverVersion>, String), Vec<usize>> = BTreeMap::new();
    for (i, n) in all.iter().enumerate().filter(|(_, n)| crate::analysis::fleet::has_gpus(index, n)) {
        let d = crate::analysis::fleet::node_driver(index, n);
        let label = d.as_ref().map_or_else(|| "unknown".to_string(), |d| d.to_string());
        by_driver.entry((d, label)).or_default().push(i);
    }
    // newest driver first, unknown last
    let mut rows: Vec<_> = by_driver.into_iter().collect();
    rows.sort_by(|a, b| match (&a.0.0, &b.0.0) {
        (Some(x), Some(y)) => y.cmp(x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    // By node position, its row.
    let mut row_at: Vec<Option<usize>> = vec![None; all.len()];
    for (r, (_, nodes)) in rows.iter().enumerate() {
        for &i in nodes {
            row_at[i] = Some(r);
        }
    }
    // Pods of one image share one (interned) need: parse each distinct one
    // once and collect its pods in that need's column, each with its row.
    let mut columns: Vec<(Need, Vec<RowAndPod>)> = Vec::new();
    let mut column_of: HashMap<*const CudaNeed, Option<usize>> = HashMap::new();
    let mut unknown_need = 0;
    let mut selectors = crate::analysis::dra::cel::Selectors::default();
    // Pods with claims are listed whatever their claims ask: keep those whose claims hold or ask for GPUs.
    for w in index.gpu_workloads().iter().filter(|w| w.pod.wants_gpu() || index.dra().wants_gpus(&mut selectors, w.pod))
    {
        let column = w.cuda.and_then(|c| {
            *column_of.entry(std::ptr::from_ref(c)).or_insert_with(|| {
                let need = need_of(c)?;
                columns.push((need, Vec::new()));
                Some(columns.len() - 1)
            })
        });
        match column {
            Some(i) => columns[i].1.push((w.node.and_then(|at| row_at[at]), w.pod)),
            None => unknown_need += 1,
        }
    }
    // Requirements that differ in text but not in meaning share a column.
    let mut by_need: BTreeMap<(CudaVersion, String), (Need, Vec<RowAndPod>)> = BTreeMap::new();
    for (need, pods) in columns {
        by_need.entry((need.cuda, need.column())).or_insert_with(|| (need, Vec::new())).1.extend(pods);
    }
    let mut m = Matrix { unknown_need, ..Matrix::default() };
    for ((_, label), nodes) in &rows {
        m.drivers.push((label.clone(), nodes.iter().map(|&i| all[i].name.clone()).collect()));
    }
    // A row's nodes share a driver; their facts differ only by what the
    // node says of its CUDA runtime and product, so those are read once.
    let row_facts: Vec<Vec<NodeFacts>> = rows
        .iter()
        .map(|(_, nodes)| {
            let mut inputs_seen = Vec::new();
            let mut distinct: Vec<NodeFacts> = Vec::new();
            for &i in nodes {
                let inputs = (all[i].gpu.cuda_runtime, all[i].gpu.product.clone());
                if inputs_seen.contains(&inputs) {
                    continue;
                }
                inputs_seen.push(inputs);
                let facts = node_facts_in(index, all[i]);
                if !distinct.contains(&facts) {
                    distinct.push(facts);
                }
            }
            distinct
        })
        .collect();
    for ((_, column), (need, pods)) in by_need.iter().rev() {
        let mut workloads = Sample::default();
        let mut placed: Vec<Sample> = vec![Sample::default(); rows.len()];
        for (row, p) in pods {
            workloads.add(p);
            if let Some(r) = *row {
                placed[r].add(p);
            }
        }
        m.needs.push((column.clone(), workloads.clone()));
        for (r, (((_, label), nodes), placed)) in rows.iter().zip(placed).enumerate() {
            // The worst verdict over the row's nodes (products may differ).
            let (verdict, reason) = row_facts[r]
                .iter()
                .map(|f| verdict(need, f, now))
                .max_by_key(|(v, _)| *v)
                .unwrap_or((Verdict::Unknown, String::new()));
            m.cells.push(Cell {
                driver: label.clone(),
                nodes: nodes.iter().map(|&i| all[i].name.clone()).collect(),
                cuda: column.clone(),
                workloads: workloads.clone(),
                placed,
                verdict,
                reason,
            });
        }
    }
    m
}
