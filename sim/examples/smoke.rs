fn main() {
    let cfg = sim::world::RunConfig {
        seed: 1,
        design: "set-nx-px-lua".into(),
        factory: sim::world::builtin_factory("set-nx-px-lua").unwrap(),
        scenario: "smoke".into(),
        workload: sim::world::Workload::default(),
        client_clocks: vec![],
        server_clock: Default::default(),
        plan: Default::default(),
        stepping: Default::default(),
    };
    let t = std::time::Instant::now();
    let h = sim::world::run(&cfg).unwrap();
    println!("{} events in {:?}", h.events.len(), t.elapsed());
    for e in h.events.iter().take(12) {
        println!("{e:?}");
    }
}
