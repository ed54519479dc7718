//! Renders a synthetic two-stream, one-drive job to the paths given, to look at the
//! figure: `cargo run -p tapeloom-report --example sample_report -- /tmp/a.png /tmp/a.html`.

use tapeloom_report::{render, JobSeries, Sample, Track};

fn main() {
    let job = synthetic_job();
    for arg in std::env::args().skip(1) {
        if let Err(e) = render(&job, std::path::Path::new(&arg)) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        println!("wrote {arg}");
    }
}

/// Ten minutes of a backup: two streams, one LTO-like drive that steps down and
/// backhitches while the slower stream starves the pool.
fn synthetic_job() -> JobSeries {
    let mut streams = vec![
        ("home", Vec::new(), 0u64),
        ("srv-db", Vec::new(), 0u64),
        ("mail", Vec::new(), 0u64),
    ];
    let mut drive = Vec::new();
    let mut backhitches = 0u64;
    let mut total = 0u64;
    for i in 0..=600u32 {
        let t = f64::from(i) + f64::from(i % 3) * 0.05;
        let phase = i as f64 / 600.0;
        let starving = (200..330).contains(&i);
        let wobble = ((i as f64) * 0.37).sin();
        let rates = [
            if starving {
                30e6
            } else {
                140e6 + 15e6 * wobble
            },
            if starving {
                20e6 + 10e6 * wobble
            } else {
                95e6 - 30e6 * phase
            },
            if i < 450 { 40e6 + 8e6 * wobble } else { 0.0 },
        ];
        let pool = if starving {
            0.12 + 0.05 * wobble.abs()
        } else {
            0.78 + 0.1 * wobble
        };
        let shares = [0.45, 0.35, 0.20];
        for ((_, samples, bytes), (rate, share)) in streams.iter_mut().zip(rates.iter().zip(shares))
        {
            *bytes += *rate as u64;
            samples.push(Sample {
                t,
                bytes: *bytes,
                pool_fill: pool * share,
                ..Sample::default()
            });
        }
        total += rates.iter().sum::<f64>() as u64;
        if starving && i % 9 == 0 {
            backhitches += 1 + u64::from(i % 2);
        }
        let speed = if starving {
            if i < 260 {
                160.0
            } else {
                112.0
            }
        } else {
            300.0
        };
        drive.push(Sample {
            t,
            bytes: total,
            pool_fill: pool,
            buffer_fill: Some(if starving {
                0.25 + 0.2 * wobble.abs()
            } else {
                0.92
            }),
            backhitches,
            speed_mb_s: Some(speed),
        });
    }
    JobSeries {
        title: "job 3 (backup: home,srv-db,mail)".into(),
        summary: vec![
            ("status".into(), "ok".into()),
            ("duration".into(), "10 min 0 s".into()),
            ("written".into(), format!("{:.1} GB", total as f64 / 1e9)),
            ("backhitches".into(), backhitches.to_string()),
            ("note".into(), "escaped: <b>& \"quotes\"".into()),
        ],
        streams: streams
            .into_iter()
            .map(|(name, samples, _)| Track {
                name: name.into(),
                samples,
            })
            .collect(),
        drives: vec![Track {
            name: "st0".into(),
            samples: drive,
        }],
        spans: Vec::new(),
    }
}
