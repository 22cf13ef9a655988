//! What the table prints after the rows: the run's summary and ratios, the latency detail and
//! the CPU each path used.

use super::*;

/// Where a paced row's latency went: which 10 ms windows of the run its tail was due in, and for
/// the librdkafka rows the client's own split per statistics interval.
pub(super) fn print_latency_detail(m: &Measured) {
    let Some(detail) = &m.latency_detail else {
        return;
    };
    let tail = &detail.tail;
    let worst: Vec<String> = tail
        .worst
        .iter()
        .map(|w| format!("{} ms ({}, max {:.1} ms)", w.start_ms, w.tail_records, w.max_ms))
        .collect();
    println!(
        "tail {:<22} run {} (began at {:.3} s since the epoch): {} records at or above p99 {:.2} ms, due in {} of {} windows of {TAIL_WINDOW_MS} ms; {:.0} % in the worst {}: {}",
        m.label,
        m.run,
        detail.started_unix_s,
        tail.tail_records,
        tail.threshold_ms,
        tail.windows_with_tail,
        tail.windows,
        tail.share_in_worst * 100.0,
        tail.worst.len(),
        worst.join(", ")
    );
    if let Some(sends) = &detail.sends {
        println!(
            "sends {:<21} run {}: {} sends, send to confirmation p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            m.label, m.run, sends.calls, sends.p50_ms, sends.p99_ms, sends.max_ms
        );
    }
    if let Some(client) = &detail.client {
        let rtt_p99 = median(client.intervals.iter().map(|i| i.rtt_p99_ms).collect());
        println!(
            "client {:<20} run {}: librdkafka over {} intervals, worst p99 / max: queue (linger included) {:.2} / {:.2} ms, output buffer {:.2} / {:.2} ms, round trip {:.2} / {:.2} ms (p99 median {:.2} ms)",
            m.label,
            m.run,
            client.intervals.len(),
            client.max_of(|i| i.queue_p99_ms),
            client.max_of(|i| i.queue_max_ms),
            client.max_of(|i| i.outbuf_p99_ms),
            client.max_of(|i| i.outbuf_max_ms),
            client.max_of(|i| i.rtt_p99_ms),
            client.max_of(|i| i.rtt_max_ms),
            rtt_p99
        );
    }
}

/// Where one phase's CPU went, per record, and the throughput the machine's cores would allow
/// if that phase had them all: the ceiling a CPU-bound path cannot pass on this machine.
pub(super) fn print_cpu(m: &Measured, records: usize, cores: usize) {
    // The binary row's gateway is a process of its own, counted with the server it reads.
    let watched = if m.row == Row::GatewayIggyBinary {
        "server and gateway"
    } else {
        "server"
    };
    for (phase, cpu, rate) in [
        ("produce", &m.produce_cpu, m.produce_records_per_s),
        ("fetch", &m.fetch_cpu, m.fetch_records_per_s),
    ] {
        print_phase_cpu(m.label, phase, cpu, rate, records, cores, watched);
    }
}

/// One run's lines after its rows: the stored messages read back, the ratios and the fetch bound.
pub(super) fn summarise_run(report: &mut Report, args: &Args, run: usize, records: usize, cores: usize) {
    let find = |row: Row| report.rows.iter().find(|m| m.row == row && m.run == run);
    let native_fetch = find(Row::Native).map(|m| m.fetch_records_per_s);
    for (m, poll) in report
        .rows
        .iter()
        .filter(|m| m.run == run)
        .filter_map(|m| Some((m, m.mapped_poll.as_ref()?)))
    {
        let of_native = |rate: f64| native_fetch.map_or(String::new(), |n| format!(" ({:.2}× native)", rate / n));
        println!(
            "cpu {:<22} its stored messages read back by the native row's poll: {:.3} M rec/s{}, server {:.2} µs/record",
            m.label,
            poll.mapped.records_per_s / 1e6,
            of_native(poll.mapped.records_per_s),
            poll.mapped.server_us_per_record
        );
        if let Some(plain) = &poll.plain {
            println!(
                "cpu {:<22} the native row's messages read again the same way, in turn with those: {:.3} M rec/s{}, server {:.2} µs/record; the row's fetch is {:.2}× this",
                m.label,
                plain.records_per_s / 1e6,
                of_native(plain.records_per_s),
                plain.server_us_per_record,
                m.fetch_records_per_s / plain.records_per_s
            );
        }
    }
    let run_label = if args.runs > 1 {
        format!("run {run}: ")
    } else {
        String::new()
    };
    let mut ratios = Vec::new();
    for (over, under) in [
        (Row::NativeRelayed, Row::Native),
        (Row::GatewayIggy, Row::Native),
        (Row::GatewayIggyBinary, Row::Native),
        (Row::GatewayEmbedded, Row::Tansu),
        (Row::GatewayEmbedded, Row::Native),
    ] {
        if let (Some(a), Some(b)) = (find(over), find(under)) {
            let produce = a.produce_records_per_s / b.produce_records_per_s;
            let fetch = a.fetch_records_per_s / b.fetch_records_per_s;
            let cold_fetch = a
                .cold_fetch_records_per_s
                .zip(b.cold_fetch_records_per_s)
                .map(|(a, b)| a / b);
            println!(
                "{run_label}ratio {} / {}: produce {produce:.2}×, fetch {fetch:.2}×{}",
                over.label(),
                under.label(),
                cold_fetch.map_or(String::new(), |c| format!(", cold fetch {c:.2}×"))
            );
            ratios.push(Ratio {
                run,
                over,
                under,
                produce,
                fetch,
                cold_fetch,
            });
        }
    }
    let bound = match (find(Row::Native), find(Row::NativeRelayed), find(Row::GatewayIggy)) {
        (Some(native), Some(relayed), Some(gateway)) => Some(fetch_bound(native, relayed, gateway, records, cores)),
        _ => None,
    };
    report.ratios.extend(ratios);
    let Some(bound) = bound else {
        return;
    };
    println!(
        "{run_label}fetch bound for any gateway here: {:.3} M rec/s ({:.2}× native) = {cores} cores / (server {:.2} + relay {:.2} + Kafka client {:.2} µs/record)",
        bound.records_per_s / 1e6,
        bound.of_native,
        bound.server_us_per_record,
        bound.relay_us_per_record,
        bound.client_us_per_record
    );
    if let Some(mapped) = &bound.mapped {
        println!(
            "{run_label}fetch bound for any gateway storing these records as the seed maps them: {:.3} M rec/s ({:.2}× native) = {cores} cores / (server {:.2} (×{:.2}, the mapped form's cost over plain messages') + relay {:.2} + Kafka client {:.2} µs/record)",
            mapped.records_per_s / 1e6,
            mapped.of_native,
            mapped.server_us_per_record,
            mapped.mapped_over_plain,
            bound.relay_us_per_record,
            bound.client_us_per_record
        );
    }
    report.fetch_bounds.push(bound);
}

/// Reads one figure of a run's ratio, when the run has it.
type RatioFigure = fn(&Ratio) -> Option<f64>;

/// Each ratio's median, lower quartile and range over the runs, the measure docs/performance.md
/// states its targets by; printed when there was more than one run.
pub(super) fn summarise_ratios(report: &mut Report) {
    let mut pairs: Vec<(Row, Row)> = Vec::new();
    for ratio in &report.ratios {
        if !pairs.contains(&(ratio.over, ratio.under)) {
            pairs.push((ratio.over, ratio.under));
        }
    }
    let figures: [(&'static str, RatioFigure); 3] = [
        ("produce", |r| Some(r.produce)),
        ("fetch", |r| Some(r.fetch)),
        ("cold_fetch", |r| r.cold_fetch),
    ];
    for (over, under) in pairs {
        for (figure, value) in figures {
            let values: Vec<f64> = report
                .ratios
                .iter()
                .filter(|r| r.over == over && r.under == under)
                .filter_map(value)
                .collect();
            if values.len() < 2 {
                continue;
            }
            let spread = RatioSpread {
                over,
                under,
                figure,
                runs: values.len(),
                median: median(values.clone()),
                lower_quartile: lower_quartile(values.clone()),
                min: values.iter().copied().fold(f64::INFINITY, f64::min),
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            };
            println!(
                "over {} runs, ratio {} / {}, {}: median {:.2}×, lower quartile {:.2}×, from {:.2}× to {:.2}×",
                spread.runs,
                over.label(),
                under.label(),
                figure.replace('_', " "),
                spread.median,
                spread.lower_quartile,
                spread.min,
                spread.max
            );
            report.ratio_spreads.push(spread);
        }
    }
}

/// Each gateway row's p99 over the native row's at the same rate, run by run, and over the runs:
/// the latency target's measure (docs/performance.md).
pub(super) fn summarise_latency(report: &mut Report, rate: f64) {
    for row in [Row::GatewayIggy, Row::GatewayIggyBinary, Row::GatewayEmbedded] {
        let mut added = Vec::new();
        for m in report.rows.iter().filter(|m| m.row == row) {
            let Some(native) = report.rows.iter().find(|n| n.row == Row::Native && n.run == m.run) else {
                continue;
            };
            let added_ms = m.produce_p99_ms - native.produce_p99_ms;
            println!(
                "latency at {:.3} M rec/s, run {}: {} p99 {:.2} ms, native p99 {:.2} ms: added {added_ms:.2} ms",
                rate / 1e6,
                m.run,
                row.label(),
                m.produce_p99_ms,
                native.produce_p99_ms,
            );
            added.push(added_ms);
        }
        if added.is_empty() {
            continue;
        }
        let summary = AddedLatency {
            row,
            median_ms: median(added.clone()),
            min_ms: added.iter().copied().fold(f64::INFINITY, f64::min),
            max_ms: added.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            above_1_ms: added.iter().filter(|&&a| a > 1.0).count(),
            added_p99_ms: added,
        };
        println!(
            "latency at {:.3} M rec/s: {} added p99 median {:.2} ms over {} run(s) (from {:.2} to {:.2}; above 1 ms in {})",
            rate / 1e6,
            row.label(),
            summary.median_ms,
            summary.added_p99_ms.len(),
            summary.min_ms,
            summary.max_ms,
            summary.above_1_ms
        );
        report.added_latency.push(summary);
    }
}
