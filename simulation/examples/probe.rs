use kafka_iggy_simulation::checks::{check, render};
use kafka_iggy_simulation::scenarios::find;
use kafka_iggy_simulation::world::run_world;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let s = find(&args[1]).unwrap();
    let seeds: u64 = args.get(2).map(|a| a.parse().unwrap()).unwrap_or(1);
    let start = std::time::Instant::now();
    let mut agg = render::Aggregate::new(s.name);
    for seed in 1..=seeds {
        let out = run_world(s.name, &s.config, seed, false);
        let v = check(&out.history);
        if v.fails() || out.unfinished.is_some() {
            println!(
                "seed {seed}: {:?}\n{}",
                out.unfinished,
                render::report(&out.history, &v)
            );
        }
        agg.add(seed, &v);
    }
    println!("{}{:?}", agg.table(), start.elapsed());
}
