//! `render` through the public API, into a temporary directory, in every format.

use std::path::Path;

use tapeloom_report::{
    render, render_staged, DataPhase, JobSeries, ReportError, Sample, Span, StageFill, StageSample,
    Track,
};

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Two streams feeding one drive with a timing model: 120 s, a slow phase in the
/// middle where the pool drains, the drive steps down and backhitches.
fn job() -> JobSeries {
    let mut home = Vec::new();
    let mut srv = Vec::new();
    let mut drive = Vec::new();
    let (mut home_bytes, mut srv_bytes) = (0u64, 0u64);
    let mut backhitches = 0;
    for i in 0..=120u32 {
        let t = f64::from(i) + if i % 7 == 3 { 0.15 } else { 0.0 };
        let slow = (45..75).contains(&i);
        home_bytes += if slow { 40_000_000 } else { 160_000_000 };
        srv_bytes += if slow {
            25_000_000
        } else {
            120_000_000 + u64::from(i % 5) * 4_000_000
        };
        if slow && i % 6 == 0 {
            backhitches += 1;
        }
        let pool = if slow { 0.15 } else { 0.8 };
        home.push(Sample {
            t,
            bytes: home_bytes,
            pool_fill: pool * 0.55,
            ..Sample::default()
        });
        srv.push(Sample {
            t,
            bytes: srv_bytes,
            pool_fill: pool * 0.45,
            ..Sample::default()
        });
        drive.push(Sample {
            t,
            bytes: home_bytes + srv_bytes,
            pool_fill: pool,
            buffer_fill: Some(if slow { 0.3 } else { 0.95 }),
            backhitches,
            speed_mb_s: Some(if slow { 112.0 } else { 300.0 }),
        });
    }
    JobSeries {
        title: "job 3 (backup: home,srv)".into(),
        summary: vec![
            ("status".into(), "ok".into()),
            ("note".into(), "<b>& friends".into()),
        ],
        streams: vec![
            Track {
                name: "home".into(),
                samples: home,
            },
            Track {
                name: "srv".into(),
                samples: srv,
            },
        ],
        drives: vec![Track {
            name: "st0".into(),
            samples: drive,
        }],
        spans: vec![
            Span {
                label: "loading".into(),
                drive: Some("st0".into()),
                from: 0.0,
                to: 14.0,
            },
            Span {
                label: "index".into(),
                drive: Some("st0".into()),
                from: 112.0,
                to: 125.0,
            },
            Span {
                label: "broken".into(),
                drive: None,
                from: f64::NAN,
                to: 3.0,
            },
        ],
    }
}

fn render_to(job: &JobSeries, dir: &Path, name: &str) -> Vec<u8> {
    let path = dir.join(name);
    render(job, &path).unwrap_or_else(|e| panic!("render {name}: {e}"));
    std::fs::read(&path).unwrap()
}

#[test]
fn svg_names_every_stream_and_drive() {
    let dir = tempfile::tempdir().unwrap();
    let svg = String::from_utf8(render_to(&job(), dir.path(), "job.svg")).unwrap();
    assert!(svg.contains("<svg"));
    for name in ["home", "srv", "st0", "job 3 (backup: home,srv)"] {
        assert!(svg.contains(name), "{name} missing");
    }
    assert!(svg.contains("drive st0: 5 backhitches"));
    assert!(svg.contains("drive st0: drive buffer"));
    assert!(svg.contains("speed step (MB/s)"));
}

#[test]
fn spans_without_data_are_shaded_named_and_in_the_legend() {
    let dir = tempfile::tempdir().unwrap();
    let svg = String::from_utf8(render_to(&job(), dir.path(), "job.svg")).unwrap();
    // Named on the plot (wide enough) and in the legend. The SVG backend puts a
    // text element's text on a line of its own.
    assert_eq!(
        svg.matches("\nloading\n").count(),
        2,
        "loading not named twice"
    );
    assert_eq!(svg.matches("\nindex\n").count(), 2, "index not named twice");
    assert!(
        !svg.contains("broken"),
        "a span with no usable time was drawn"
    );
    let mut plain = job();
    plain.spans.clear();
    let plain = String::from_utf8(render_to(&plain, dir.path(), "plain.svg")).unwrap();
    assert!(!plain.contains("\nloading\n"));
    assert!(svg.matches("<rect").count() >= plain.matches("<rect").count() + 3 * 2 + 2);
}

#[test]
fn data_phase_rates_leave_out_the_time_before_and_after_the_data() {
    let at = |t: f64, bytes: u64| Sample {
        t,
        bytes,
        ..Sample::default()
    };
    // Loading until 17 s, then 33 MB/s for 10 s, then idle while the index is written.
    let mut samples = vec![at(0.0, 0), at(17.0, 0)];
    for i in 1..=10u64 {
        samples.push(at(17.0 + i as f64, i * 33_000_000));
    }
    samples.push(at(29.0, 330_000_000));
    let drive = Track {
        name: "0".into(),
        samples,
    };
    let p = DataPhase::of(&drive).unwrap();
    assert_eq!((p.from, p.to, p.bytes), (17.0, 27.0, 330_000_000));
    assert!((p.mb_per_s().unwrap() - 33.0).abs() < 1e-9);
    let idle = Track {
        name: "1".into(),
        samples: vec![at(0.0, 0), at(5.0, 0)],
    };
    assert_eq!(DataPhase::of(&idle), None);
    let later = Track {
        name: "2".into(),
        samples: vec![at(20.0, 0), at(30.0, 100_000_000)],
    };
    let all = DataPhase::of_all([&drive, &idle, &later]).unwrap();
    assert_eq!((all.from, all.to, all.bytes), (17.0, 30.0, 430_000_000));
}

#[test]
fn png_is_a_real_image() {
    let dir = tempfile::tempdir().unwrap();
    let png = render_to(&job(), dir.path(), "job.png");
    assert!(png.starts_with(PNG_MAGIC));
    assert!(png.len() > 20_000, "only {} bytes", png.len());
}

#[test]
fn html_escapes_the_summary_and_inlines_the_svg() {
    let dir = tempfile::tempdir().unwrap();
    let html = String::from_utf8(render_to(&job(), dir.path(), "job.html")).unwrap();
    assert!(html.contains("&lt;b&gt;&amp; friends"));
    assert!(!html.contains("<b>&"));
    assert!(html.contains("<svg"));
    assert!(!html.contains("<?xml"));
    assert!(!html.contains("<script"));
    for name in ["home", "srv", "st0"] {
        assert!(html.contains(name), "{name} missing");
    }
}

#[test]
fn markup_in_names_stays_escaped_in_the_svg() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = job();
    job.title = "job <9> & co".into();
    job.streams[0].name = "a<b>&c".into();
    let svg = String::from_utf8(render_to(&job, dir.path(), "job.svg")).unwrap();
    assert!(svg.contains("a&lt;b&gt;&amp;c"));
    assert!(!svg.contains("a<b>"));
    assert!(!svg.contains("<9>"));
}

#[test]
fn zero_samples_draw_an_empty_figure_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = job();
    for track in job.streams.iter_mut().chain(job.drives.iter_mut()) {
        track.samples.clear();
    }
    let svg = String::from_utf8(render_to(&job, dir.path(), "empty.svg")).unwrap();
    assert!(svg.contains("no samples recorded"));
    assert!(render_to(&job, dir.path(), "empty.png").starts_with(PNG_MAGIC));
    let empty = JobSeries::default();
    let svg = String::from_utf8(render_to(&empty, dir.path(), "nothing.svg")).unwrap();
    assert!(svg.contains("no drives"));
}

#[test]
fn one_sample_and_uneven_tracks_render() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = job();
    job.streams[0].samples.truncate(1);
    job.streams[1].samples.truncate(40);
    let svg = String::from_utf8(render_to(&job, dir.path(), "uneven.svg")).unwrap();
    assert!(svg.contains("home"));
    job.drives[0].samples.truncate(1);
    job.streams[1].samples.truncate(1);
    let svg = String::from_utf8(render_to(&job, dir.path(), "one.svg")).unwrap();
    assert!(svg.contains("at least two samples"));
}

#[test]
fn drives_without_a_model_still_get_fill_and_backhitch_panels() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = job();
    for s in &mut job.drives[0].samples {
        s.buffer_fill = None;
        s.speed_mb_s = None;
    }
    let svg = String::from_utf8(render_to(&job, dir.path(), "nomodel.svg")).unwrap();
    // The bottom panel counts backhitches instead.
    assert!(svg.contains("Drive backhitches (no speed model)"));
    assert!(svg.contains("drive st0: 5 backhitches"));
    assert!(svg.contains("drive st0: pool fill"));
    assert!(!svg.contains("drive st0: drive buffer"));
    assert!(render_to(&job, dir.path(), "nomodel.png").starts_with(PNG_MAGIC));

    for s in &mut job.drives[0].samples {
        s.backhitches = 0;
    }
    let svg = String::from_utf8(render_to(&job, dir.path(), "quiet.svg")).unwrap();
    assert!(svg.contains("no speed steps (no drive timing model) and no backhitches"));
}

#[test]
fn hostile_values_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = job();
    let bad = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -5.0,
        1e300,
        -0.0,
    ];
    for (i, s) in job.drives[0].samples.iter_mut().enumerate() {
        let v = bad[i % bad.len()];
        s.t = if i % 4 == 0 { v } else { s.t };
        s.pool_fill = v;
        s.buffer_fill = Some(v);
        s.speed_mb_s = Some(v);
        s.bytes = if i % 3 == 0 { u64::MAX } else { s.bytes };
        s.backhitches = if i % 5 == 0 { 0 } else { s.backhitches };
    }
    job.streams[1].samples.reverse();
    job.streams[0].name = String::new();
    job.title = "x".repeat(500);
    for ext in ["svg", "png", "html"] {
        render_to(&job, dir.path(), &format!("bad.{ext}"));
    }
}

#[test]
fn unknown_extension_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["job.pdf", "job", "job.svg.txt"] {
        let path = dir.path().join(name);
        let err = render(&job(), &path).unwrap_err();
        assert!(
            matches!(&err, ReportError::UnknownExtension { path: p } if *p == path),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.contains(".svg") && err.contains(".png") && err.contains(".html"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        assert!(!path.exists());
    }
}

#[test]
fn extension_case_does_not_matter() {
    let dir = tempfile::tempdir().unwrap();
    assert!(String::from_utf8(render_to(&job(), dir.path(), "JOB.SVG"))
        .unwrap()
        .contains("<svg"));
}

#[test]
fn unwritable_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = render(&job(), &dir.path().join("missing/dir/job.svg")).unwrap_err();
    assert!(matches!(err, ReportError::Write { .. }), "{err:?}");
    let source = std::error::Error::source(&err).expect("the file system's error");
    assert!(source.is::<std::io::Error>(), "{source}");
    let err = err.to_string();
    assert!(err.contains("write"), "{err}");
}

#[test]
fn a_staged_job_gets_a_stage_fill_panel_and_a_direct_one_none() {
    let dir = tempfile::tempdir().unwrap();
    let size = 64_000_000u64;
    let samples = (0..=120u32)
        .map(|i| {
            let bytes = u64::from(i.min(120 - i)) * 800_000;
            StageSample {
                t: f64::from(i),
                bytes,
                share: bytes as f64 / size as f64,
            }
        })
        .collect();
    let stage = StageFill { samples };
    assert_eq!(stage.peak().map(|p| p.bytes), Some(48_000_000));
    assert_eq!(stage.size(), Some(size));
    for ext in ["svg", "html", "png"] {
        let path = dir.path().join(format!("staged.{ext}"));
        render_staged(&job(), &stage, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        if ext == "png" {
            assert_eq!(&bytes[..8], PNG_MAGIC);
            continue;
        }
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("Stage fill"), "{ext}");
        assert!(text.contains("peak 48.0 of 64.0 MB (75%)"), "{ext}");
    }
    let direct = String::from_utf8(render_to(&job(), dir.path(), "direct.svg")).unwrap();
    assert!(!direct.contains("Stage fill") && !direct.contains("stage fill"));
    // No samples still draws the panel, saying so.
    let empty = StageFill::default();
    let path = dir.path().join("empty.svg");
    render_staged(&JobSeries::default(), &empty, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("no stage samples recorded"));
}
