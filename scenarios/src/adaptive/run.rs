//! The scheduler: runs many cells under the [`Rule`] on a few threads,
//! deterministically (the order each cell's runs are read in, the bare run and the
//! placements handed out only once what they depend on is in).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sim::history::History;
use sim::world::{DEFAULT_WALL_BUDGET, RunError, run_bounded};

use super::{Rule, Settled, Tracker};
use crate::catalog::{Placement, Scenario};
use crate::checkers::Safety;
use crate::sweep::{DesignSpec, RunSummary, config, summarize, unfinished};

/// One cell to run: a design, a scenario, and the first seed.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The design.
    pub design: &'a DesignSpec,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The first seed (0 for the main job).
    pub start: u64,
}

/// What a cell came to under the rule.
#[derive(Debug)]
pub struct Outcome<A> {
    /// The runs the rule read, in seed order.
    pub runs: Vec<RunSummary>,
    /// The caller's extracts of those runs, folded in seed order.
    pub acc: A,
    /// How it stopped.
    pub settled: Settled,
    /// Host runs its kept runs spent (what the budget counts).
    pub cost: u64,
    /// Wall time its runs took on their threads, the dropped ones included (what the
    /// cell cost; varies from machine to machine, unlike everything else here).
    pub wall: Duration,
}

/// One run of a cell: a seed's plan, the bare run, or the fault placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Seed(u64),
    Placed(Placement),
}

/// A finished run waiting for its turn: its summary, the caller's extract (seeded
/// runs only), its cost, and for the bare run the placements its steps gave.
struct Done<T> {
    summary: RunSummary,
    extra: Option<T>,
    cost: u64,
    /// The bare run's placements, and how many its steps gave (more when spread).
    spots: Option<(Vec<u64>, u64)>,
}

struct CellState<T, A> {
    /// The next item to hand out.
    next: u64,
    in_flight: usize,
    pending: BTreeMap<u64, Done<T>>,
    /// Items read.
    read: u64,
    kept: Vec<RunSummary>,
    acc: A,
    tracker: Tracker,
    wall: Duration,
    started: bool,
    /// Whether the cell places its fault: the rule does, its scenario has a timed
    /// fault, and its runs are cheap enough ([`placing_fits`]); `None` until its first
    /// seed is read (nothing past that seed is handed out before).
    placeable: Option<bool>,
    /// The placements' times, once the bare run is in.
    spots: Option<Vec<u64>>,
}

impl<T, A> CellState<T, A> {
    /// The cell's `k`-th run: seed `start`, then (placing) the bare run, then each
    /// placement, the first `min_seeds - 1` of them each followed by the next seed, then
    /// the seeds after. `None` while that depends on the bare run's placements, not yet
    /// in.
    fn item(&self, k: u64, start: u64, min_seeds: u64) -> Option<Item> {
        match (k, self.placeable) {
            (0, _) => return Some(Item::Seed(start)),
            (_, None) => return None,
            (_, Some(false)) => return Some(Item::Seed(start + k)),
            (_, Some(true)) => {}
        }
        match k {
            0 => Some(Item::Seed(start)),
            1 => Some(Item::Placed(Placement::Bare)),
            _ => {
                let spots = self.spots.as_ref()?;
                let (n, p) = (k - 2, spots.len() as u64);
                // Seeds 1 .. min_seeds - 1 go one after each of the first placements.
                let paired = p.min(min_seeds.saturating_sub(1));
                Some(if n < 2 * paired {
                    if n % 2 == 0 {
                        Item::Placed(Placement::At(spots[(n / 2) as usize]))
                    } else {
                        Item::Seed(start + 1 + n / 2)
                    }
                } else if n < paired + p {
                    Item::Placed(Placement::At(spots[(n - paired) as usize]))
                } else {
                    Item::Seed(start + 1 + (n - p))
                })
            }
        }
    }

    fn open(&self, rule: &Rule, start: u64) -> bool {
        let placed = if self.placeable == Some(true) {
            2 + 2 * self.spots.as_ref().map_or(0, |s| s.len() as u64)
        } else {
            0
        };
        self.tracker.settled().is_none()
            && self.next < placed + rule.max_seeds()
            && self.item(self.next, start, rule.min_seeds).is_some()
    }

    /// Reads every finished run that is next in order into the tracker.
    fn read_ready(&mut self, start: u64, rule: &Rule, fold: &(dyn Fn(&mut A, T) + Sync)) {
        while self.tracker.settled().is_none() {
            let Some(item) = self.item(self.read, start, rule.min_seeds) else {
                break;
            };
            let Some(done) = self.pending.remove(&self.read) else {
                break;
            };
            self.read += 1;
            let class = done.summary.safety();
            match item {
                Item::Seed(seed) => {
                    if self.placeable.is_none() {
                        let fits = placing_fits(rule.budget, done.cost);
                        self.placeable = Some(fits);
                        if !fits {
                            self.tracker.set_placements(0, 0);
                        }
                    }
                    self.tracker.push(seed, class, done.cost);
                    if let Some(extra) = done.extra {
                        fold(&mut self.acc, extra);
                    }
                    self.kept.push(done.summary);
                }
                Item::Placed(place) => {
                    if matches!(place, Placement::At(_)) {
                        self.tracker.placed_invalid(
                            done.summary
                                .verdicts
                                .iter()
                                .filter(|(_, v)| v.is_invalid())
                                .map(|(n, _)| n.as_str()),
                        );
                    }
                    self.tracker.push_placed(start, place, class, done.cost);
                    // A placed run is evidence of a violation, never a sample of the
                    // seeds' rates: kept only when it settles the cell.
                    if class == Safety::Unsafe {
                        self.kept.push(done.summary);
                    }
                }
            }
        }
    }
}

struct Sched<T, A> {
    cells: Vec<CellState<T, A>>,
    unstarted: usize,
    failure: Option<(usize, RunError)>,
}

/// Runs every job under `rule` on `threads` threads (at least one) and returns each
/// cell's [`Outcome`], in the jobs' order. A thread keeps to one cell while it is open,
/// takes the next unstarted cell when its own stops, and when none is left joins the
/// open cell with the fewest runs in flight (running its next run ahead; a result past
/// the settling run is dropped). `extract` sees each seeded run's history (`None` for a
/// run that did not finish), to keep what the caller needs of it, such as latency, and
/// `fold` adds each kept seeded run's extract to its cell's accumulator, in order (so a
/// cell holds one accumulator, not an extract per run); `on_cell` is told when a cell
/// stops (for a progress bar). A bad configuration stops everything and is returned
/// with its job's index.
pub fn run_cells<T: Send, A: Default + Send>(
    jobs: &[Job<'_>],
    rule: Rule,
    threads: usize,
    extract: &(dyn Fn(Option<&History>, &RunSummary) -> T + Sync),
    fold: &(dyn Fn(&mut A, T) + Sync),
    on_cell: &(dyn Fn(usize, &Settled) + Sync),
) -> Result<Vec<Outcome<A>>, (usize, RunError)> {
    let sched = Mutex::new(Sched {
        cells: jobs
            .iter()
            .map(|j| {
                let placeable = (rule.placed && j.scenario.timed_faults() > 0).then_some(true);
                let mut tracker = Tracker::new(rule);
                if placeable.is_none() {
                    tracker.set_placements(0, 0);
                }
                // Decided at the first seed's cost.
                let placeable = placeable.map_or(Some(false), |_| None);
                CellState {
                    next: 0,
                    in_flight: 0,
                    pending: BTreeMap::new(),
                    read: 0,
                    kept: Vec::new(),
                    acc: A::default(),
                    tracker,
                    wall: Duration::ZERO,
                    started: false,
                    placeable,
                    spots: None,
                }
            })
            .collect(),
        unstarted: 0,
        failure: None,
    });
    let pick = |s: &mut Sched<T, A>, mine: Option<usize>| -> Option<(usize, u64, Item)> {
        if s.failure.is_some() {
            return None;
        }
        let open = |s: &Sched<T, A>, i: usize| s.cells[i].open(&rule, jobs[i].start);
        let chosen = match mine {
            Some(i) if open(s, i) => Some(i),
            _ => {
                while s.unstarted < jobs.len() && s.cells[s.unstarted].started {
                    s.unstarted += 1;
                }
                if s.unstarted < jobs.len() {
                    Some(s.unstarted)
                } else {
                    (0..jobs.len())
                        .filter(|i| open(s, *i))
                        .min_by_key(|i| (s.cells[*i].in_flight, *i))
                }
            }
        }?;
        let c = &mut s.cells[chosen];
        let item = c.item(c.next, jobs[chosen].start, rule.min_seeds)?;
        c.started = true;
        c.in_flight += 1;
        let k = c.next;
        c.next += 1;
        Some((chosen, k, item))
    };
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut mine = None;
                loop {
                    let picked = pick(&mut sched.lock().expect("poisoned"), mine);
                    let Some((i, k, item)) = picked else {
                        // Nothing open: cells may be waiting for a bare run another
                        // thread is running, or every cell is done.
                        let s = sched.lock().expect("poisoned");
                        let waiting =
                            s.failure.is_none() && s.cells.iter().any(|c| c.in_flight > 0);
                        drop(s);
                        if waiting {
                            std::thread::sleep(Duration::from_millis(1));
                            mine = None;
                            continue;
                        }
                        break;
                    };
                    mine = Some(i);
                    let job = jobs[i];
                    let began = Instant::now();
                    let result = run_item(job, rule.budget, item, extract);
                    let took = began.elapsed();
                    let mut s = sched.lock().expect("poisoned");
                    let c = &mut s.cells[i];
                    c.in_flight -= 1;
                    c.wall += took;
                    match result {
                        Err(e) => {
                            s.failure.get_or_insert((i, e));
                        }
                        Ok(mut done) => {
                            if let Some((spots, of)) = done.spots.take() {
                                c.tracker.set_placements(spots.len() as u64, of);
                                c.spots = Some(spots);
                            }
                            if c.tracker.settled().is_some() {
                                // Run ahead of a run that settled the cell: dropped.
                                continue;
                            }
                            c.pending.insert(k, done);
                            c.read_ready(job.start, &rule, fold);
                            if let Some(settled) = c.tracker.settled() {
                                c.pending.clear();
                                on_cell(i, settled);
                            }
                        }
                    }
                }
            });
        }
    });
    let s = sched.into_inner().expect("poisoned");
    if let Some(failure) = s.failure {
        return Err(failure);
    }
    Ok(s.cells
        .into_iter()
        .map(|c| Outcome {
            settled: c
                .tracker
                .settled()
                .cloned()
                .expect("a cell is never left open: its runs go on until the rule stops it"),
            runs: c.kept,
            acc: c.acc,
            cost: c.tracker.cost,
            wall: c.wall,
        })
        .collect())
}

/// Whether a cell whose first seed cost `first` host runs places its fault under
/// `budget`: when [`crate::place::MIN_SPOTS`] runs like it fit in half the budget. A
/// five-master or etcd world's run costs ten of a single master's: placing in it would
/// spend several times its budget and the main job's time with it, and placing in the
/// replicated worlds (a third of the budget a run) took the seeds that found more
/// (measured in docs/performance.md, "Placed faults").
fn placing_fits(budget: Option<u64>, first: u64) -> bool {
    budget.is_none_or(|b| first.saturating_mul(crate::place::MIN_SPOTS as u64) <= b / 2)
}

/// Runs and judges one run of `job`: its summary, the caller's extract (a seeded run's)
/// and its cost in host runs (0 for a run that did not finish: it is unknown, and the
/// unknown limit bounds those); the bare run also gives its placements. Only a bad
/// configuration is an error.
fn run_item<T>(
    job: Job<'_>,
    budget: Option<u64>,
    item: Item,
    extract: &(dyn Fn(Option<&History>, &RunSummary) -> T + Sync),
) -> Result<Done<T>, RunError> {
    let (seed, scenario) = match item {
        Item::Seed(seed) => (seed, None),
        Item::Placed(place) => {
            let mut s = job.scenario.clone().placed(Some(place));
            // The bare run traces its client's commands: steps to place at.
            s.workload.trace_commands = place == Placement::Bare;
            (job.start, Some(s))
        }
    };
    let scenario = scenario.as_ref().unwrap_or(job.scenario);
    let seeded = matches!(item, Item::Seed(_));
    match run_bounded(&config(job.design, scenario, seed), DEFAULT_WALL_BUDGET) {
        Ok(history) => {
            let summary = summarize(scenario, &history);
            let extra = seeded.then(|| extract(Some(&history), &summary));
            let spots = (item == Item::Placed(Placement::Bare)).then(|| {
                let most = crate::place::affordable(budget, history.stats.host_runs);
                let (spots, of) = crate::place::spots_in(scenario, &history, most);
                (spots.iter().map(|s| s.at_ms).collect(), of as u64)
            });
            Ok(Done {
                summary,
                extra,
                cost: history.stats.host_runs,
                spots,
            })
        }
        Err(e @ RunError::Config(_)) => Err(e),
        Err(e) => {
            let mut summary = unfinished(seed, &e);
            summary.placement = scenario.placement;
            let extra = seeded.then(|| extract(None, &summary));
            Ok(Done {
                summary,
                extra,
                cost: 0,
                spots: (item == Item::Placed(Placement::Bare)).then(|| (Vec::new(), 0)),
            })
        }
    }
}
