use kafka_iggy_simulation::scenarios::find;
use kafka_iggy_simulation::world::run_world;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let s = find(&args[1]).unwrap();
    let seeds: u64 = args.get(2).map(|a| a.parse().unwrap()).unwrap_or(1);
    let start = std::time::Instant::now();
    for seed in 1..=seeds {
        let out = run_world(s.name, &s.config, seed, args.len() > 3);
        let h = &out.history;
        let acked: usize = h.produces.iter().filter(|p| p.acked().is_some()).count();
        let attempts: usize = h.produces.iter().map(|p| p.attempts.len()).sum();
        let backend: usize = h.backend.iter().map(|l| l.records.len()).sum();
        let drained: usize = h.drain.iter().map(|l| l.records.len()).sum();
        let polled = h.consumer_events.iter().filter(|e| matches!(e.kind, kafka_iggy_simulation::history::ConsumerEventKind::Polled{..})).count();
        println!("seed {seed}: {} ms, unfinished {:?}, requests {} acked {acked} attempts {attempts} backend {backend} drained {drained} polls {polled} faults {}", out.simulated_ms, out.unfinished, h.produces.len(), h.faults.len());
        if args.len() > 3 { for e in &out.events { println!("  {:>6} {} {}", e.at_ms, e.source, e.what); } }
    }
    println!("{:?}", start.elapsed());
}
