//! Turns raw samples into the lines the panels draw: cleaned, converted to display
//! units, and thinned to a size a figure can show. No drawing here.

use crate::{JobSeries, Sample, Span, StageFill, StageSample, Track};

/// More points than this per line are averaged in buckets: a day at one sample per
/// second is 86,400 points, far more than the figure has pixels, and SVG or HTML output
/// would grow by megabytes per line.
const MAX_POINTS: usize = 2000;

/// More backhitch marks than this per drive are merged: each draws a cross and a
/// rule, and thousands of them are a red block that tells no more than a few hundred.
const MAX_MARKS: usize = 400;

/// Bytes per MB, as tape drive data sheets count.
const MB: f64 = 1e6;

/// One stream or drive, in display units. Every point is finite, times are >= 0 and
/// in order, and values are >= 0.
#[derive(Debug, Default)]
pub(crate) struct Line {
    pub name: String,
    /// (s, MB/s)
    pub throughput: Vec<(f64, f64)>,
    /// (s, %)
    pub pool_fill: Vec<(f64, f64)>,
    /// (s, %), drives with a timing model only.
    pub buffer_fill: Vec<(f64, f64)>,
    /// (s, MB/s) as a staircase: the step holds until the next sample.
    pub speed: Vec<(f64, f64)>,
    /// (s, cumulative count) at every sample where the count grew.
    pub backhitches: Vec<(f64, u64)>,
    /// The last cumulative backhitch count.
    pub backhitch_total: u64,
    /// Time of the last sample, if there is one.
    pub t_last: Option<f64>,
}

/// The whole job, in display units, with the axis ranges the panels share.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub title: String,
    pub streams: Vec<Line>,
    pub drives: Vec<Line>,
    /// End of the shared time axis, > 0.
    pub t_end: f64,
    /// Top of the throughput axis, > 0.
    pub throughput_top: f64,
    /// Top of the speed axis, > 0.
    pub speed_top: f64,
    /// Top of the cumulative backhitch axis, > 0.
    pub backhitch_top: f64,
    /// Whether any track has a sample with a usable time.
    pub any_samples: bool,
    /// The job's spans without data, cleaned: finite, from 0, `from <= to`, in order.
    pub spans: Vec<Span>,
    /// The stages' fill, for a job backed up through them.
    pub stage: Option<StageLine>,
}

/// The stages' fill, in display units.
#[derive(Debug, Default)]
pub(crate) struct StageLine {
    /// (s, %)
    pub fill: Vec<(f64, f64)>,
    /// The sample that held the most.
    pub peak: Option<StageSample>,
    /// The stages' size in bytes, when known.
    pub size: Option<u64>,
}

impl StageLine {
    fn from_fill(stage: &StageFill) -> StageLine {
        let mut samples: Vec<StageSample> = (stage.samples.iter())
            .filter(|s| s.t.is_finite())
            .map(|s| StageSample {
                t: s.t.max(0.0),
                ..*s
            })
            .collect();
        samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        StageLine {
            fill: thin(samples.iter().map(|s| (s.t, percent(s.share))).collect()),
            peak: stage.peak(),
            size: stage.size(),
        }
    }
}

impl Prepared {
    pub(crate) fn from_job(job: &JobSeries, stage: Option<&StageFill>) -> Prepared {
        let streams: Vec<Line> = job.streams.iter().map(Line::from_track).collect();
        let drives: Vec<Line> = job.drives.iter().map(Line::from_track).collect();
        let stage = stage.map(StageLine::from_fill);
        let all = || streams.iter().chain(drives.iter());
        let spans = clean_spans(&job.spans);
        let t_end = all()
            .flat_map(|l| l.t_last)
            .chain(spans.iter().map(|s| s.to))
            .chain(stage.iter().flat_map(|s| s.fill.last().map(|p| p.0)))
            .fold(0.0, f64::max);
        let throughput_max = all()
            .flat_map(|l| l.throughput.iter())
            .map(|&(_, v)| v)
            .fold(0.0, f64::max);
        let speed_max = drives
            .iter()
            .flat_map(|l| l.speed.iter())
            .map(|&(_, v)| v)
            .fold(0.0, f64::max);
        let backhitch_max = drives.iter().map(|l| l.backhitch_total).max().unwrap_or(0);
        Prepared {
            title: job.title.clone(),
            backhitch_top: axis_top(backhitch_max as f64 * 1.15, 1.0),
            any_samples: all().any(|l| l.t_last.is_some()),
            t_end: axis_top(t_end, 1.0),
            throughput_top: axis_top(throughput_max * 1.08, 1.0),
            // Room above the top step for the backhitch counts.
            speed_top: axis_top(speed_max * 1.25, 1.0),
            streams,
            drives,
            spans,
            stage,
        }
    }
}

/// Spans with usable times only, clamped to start at 0, in time order.
fn clean_spans(spans: &[Span]) -> Vec<Span> {
    let mut out: Vec<Span> = spans
        .iter()
        .filter(|s| s.from.is_finite() && s.to.is_finite())
        .map(|s| Span {
            from: s.from.max(0.0),
            to: s.to.max(s.from).max(0.0),
            ..s.clone()
        })
        .collect();
    out.sort_by(|a, b| a.from.total_cmp(&b.from));
    out
}

/// `value`, or `floor` if that is larger or `value` is not a usable axis end.
fn axis_top(value: f64, floor: f64) -> f64 {
    if value.is_finite() && value > floor {
        value
    } else {
        floor
    }
}

impl Line {
    fn from_track(track: &Track) -> Line {
        let samples = clean(&track.samples);
        let mut line = Line {
            name: track.name.clone(),
            throughput: thin(throughput(&samples)),
            pool_fill: thin(
                samples
                    .iter()
                    .map(|s| (s.t, percent(s.pool_fill)))
                    .collect(),
            ),
            buffer_fill: thin(
                samples
                    .iter()
                    .filter_map(|s| Some((s.t, percent(s.buffer_fill?))))
                    .collect(),
            ),
            speed: thin(staircase(&samples)),
            t_last: samples.last().map(|s| s.t),
            ..Line::default()
        };
        let mut seen = 0;
        for s in &samples {
            if s.backhitches > seen {
                line.backhitches.push((s.t, s.backhitches));
            }
            seen = s.backhitches;
        }
        line.backhitch_total = seen;
        line.backhitches = thin_marks(std::mem::take(&mut line.backhitches));
        line
    }

    /// The speed step in force at time `t`: the last staircase point at or before it.
    pub(crate) fn speed_at(&self, t: f64) -> Option<f64> {
        let after = self.speed.partition_point(|&(ts, _)| ts <= t);
        after.checked_sub(1).map(|i| self.speed[i].1)
    }

    /// The cumulative backhitch count as a staircase, (s, count), from the job's start
    /// to the last sample.
    pub(crate) fn backhitch_staircase(&self) -> Vec<(f64, f64)> {
        let Some(t_last) = self.t_last else {
            return Vec::new();
        };
        let mut out = vec![(0.0, 0.0)];
        let mut count = 0.0;
        for &(t, c) in &self.backhitches {
            out.push((t, count));
            count = c as f64;
            out.push((t, count));
        }
        out.push((t_last, count));
        out
    }
}

/// At most [`MAX_MARKS`] backhitch marks: of the marks in each equal time bucket only
/// the last, whose label, the cumulative count, still tells how many there were.
fn thin_marks(marks: Vec<(f64, u64)>) -> Vec<(f64, u64)> {
    let Some(&(t_end, _)) = marks.last() else {
        return marks;
    };
    if marks.len() <= MAX_MARKS {
        return marks;
    }
    let width = t_end / MAX_MARKS as f64;
    let bucket = |t: f64| (t / width) as u64;
    let mut out: Vec<(f64, u64)> = Vec::with_capacity(MAX_MARKS + 1);
    for mark in marks {
        match out.last_mut() {
            Some(last) if bucket(last.0) == bucket(mark.0) => *last = mark,
            _ => out.push(mark),
        }
    }
    out
}

/// Samples with a finite time, clamped to >= 0, in time order (stable, so equal times
/// keep their recorded order).
fn clean(samples: &[Sample]) -> Vec<Sample> {
    let mut out: Vec<Sample> = samples
        .iter()
        .filter(|s| s.t.is_finite())
        .map(|s| Sample {
            t: s.t.max(0.0),
            ..*s
        })
        .collect();
    out.sort_by(|a, b| a.t.total_cmp(&b.t));
    out
}

/// 0..=1 to 0..=100; NaN counts as empty rather than dropping the point, so a line
/// has no hole where a value was unknown.
pub(crate) fn percent(fill: f64) -> f64 {
    if fill.is_nan() {
        0.0
    } else {
        fill.clamp(0.0, 1.0) * 100.0
    }
}

/// MB/s between samples, drawn at the end of each interval. An interval shorter than
/// half the typical spacing (a repeated time, or a sample taken just after another) is
/// merged into the next one: dividing by a near-zero dt would draw a spike that
/// flattens the rest of the panel.
fn throughput(samples: &[Sample]) -> Vec<(f64, f64)> {
    let Some(first) = samples.first() else {
        return Vec::new();
    };
    let min_dt = (median_step(samples) * 0.5).max(1e-6);
    let mut out = Vec::with_capacity(samples.len());
    let mut from = first;
    for s in &samples[1..] {
        let dt = s.t - from.t;
        if dt < min_dt {
            continue;
        }
        // A counter that went backwards (a restarted stream) shows as a stall.
        let bytes = s.bytes.saturating_sub(from.bytes) as f64;
        out.push((s.t, bytes / dt / MB));
        from = s;
    }
    out
}

fn median_step(samples: &[Sample]) -> f64 {
    let mut steps: Vec<f64> = samples
        .windows(2)
        .map(|w| w[1].t - w[0].t)
        .filter(|dt| *dt > 0.0)
        .collect();
    if steps.is_empty() {
        return 0.0;
    }
    let mid = steps.len() / 2;
    *steps.select_nth_unstable_by(mid, f64::total_cmp).1
}

/// The speed steps as a staircase: each value holds until the next sample that has
/// one. Only the corners are kept, so a long job at one speed is two points.
fn staircase(samples: &[Sample]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut last: Option<(f64, f64)> = None;
    for s in samples {
        let Some(speed) = s.speed_mb_s.filter(|v| v.is_finite()) else {
            continue;
        };
        let speed = speed.max(0.0);
        match last {
            Some((_, prev)) if prev == speed => {}
            Some((_, prev)) => {
                out.push((s.t, prev));
                out.push((s.t, speed));
            }
            None => out.push((s.t, speed)),
        }
        last = Some((s.t, speed));
    }
    if let (Some((t, v)), Some(&(t_last, _))) = (last, out.last()) {
        if t > t_last {
            out.push((t, v));
        }
    }
    out
}

/// At most [`MAX_POINTS`] points: consecutive points averaged in equal buckets.
fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let bucket = points.len().div_ceil(MAX_POINTS);
    points
        .chunks(bucket)
        .map(|chunk| {
            let n = chunk.len() as f64;
            let (t, v) = chunk
                .iter()
                .fold((0.0, 0.0), |(t, v), &(pt, pv)| (t + pt, v + pv));
            (t / n, v / n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, bytes: u64) -> Sample {
        Sample {
            t,
            bytes,
            ..Sample::default()
        }
    }

    #[test]
    fn throughput_merges_repeated_times_instead_of_dividing_by_zero() {
        let samples = [
            sample(0.0, 0),
            sample(1.0, 2_000_000),
            sample(1.0, 3_000_000),
            sample(2.0, 4_000_000),
        ];
        assert_eq!(throughput(&samples), vec![(1.0, 2.0), (2.0, 2.0)]);
    }

    #[test]
    fn throughput_of_a_shrinking_counter_is_zero_not_huge() {
        let samples = [sample(0.0, 5_000_000), sample(1.0, 1_000_000)];
        assert_eq!(throughput(&samples), vec![(1.0, 0.0)]);
    }

    #[test]
    fn clean_drops_non_finite_times_clamps_negative_and_sorts() {
        let samples = [
            sample(2.0, 1),
            sample(f64::NAN, 2),
            sample(-1.0, 3),
            sample(f64::INFINITY, 4),
        ];
        let times: Vec<f64> = clean(&samples).iter().map(|s| s.t).collect();
        assert_eq!(times, vec![0.0, 2.0]);
    }

    #[test]
    fn percent_clamps_and_treats_nan_as_empty() {
        assert_eq!(percent(f64::NAN), 0.0);
        assert_eq!(percent(-0.5), 0.0);
        assert_eq!(percent(1.5), 100.0);
        assert_eq!(percent(0.25), 25.0);
    }

    #[test]
    fn staircase_keeps_only_corners() {
        let mut samples: Vec<Sample> = (0..5).map(|i| sample(f64::from(i), 0)).collect();
        for (s, v) in samples.iter_mut().zip([300.0, 300.0, 200.0, 200.0, 200.0]) {
            s.speed_mb_s = Some(v);
        }
        assert_eq!(
            staircase(&samples),
            vec![(0.0, 300.0), (2.0, 300.0), (2.0, 200.0), (4.0, 200.0)]
        );
    }

    #[test]
    fn backhitches_are_marked_where_the_count_grows() {
        let mut samples: Vec<Sample> = (0..4).map(|i| sample(f64::from(i), 0)).collect();
        for (s, n) in samples.iter_mut().zip([0, 2, 2, 3]) {
            s.backhitches = n;
        }
        let line = Line::from_track(&Track {
            name: "d".into(),
            samples,
        });
        assert_eq!(line.backhitches, vec![(1.0, 2), (3.0, 3)]);
        assert_eq!(line.backhitch_total, 3);
    }

    #[test]
    fn long_series_are_thinned() {
        let points: Vec<(f64, f64)> = (0..86_400).map(|i| (f64::from(i), 1.0)).collect();
        let thinned = thin(points);
        assert!(thinned.len() <= MAX_POINTS);
        assert!(thinned.iter().all(|&(_, v)| v == 1.0));
    }

    #[test]
    fn many_backhitches_are_merged_keeping_the_count() {
        let marks: Vec<(f64, u64)> = (1..=10_000).map(|i| (i as f64, i)).collect();
        let thinned = thin_marks(marks);
        assert!(thinned.len() <= MAX_MARKS + 1);
        assert_eq!(thinned.last(), Some(&(10_000.0, 10_000)));
    }

    #[test]
    fn speed_at_takes_the_step_in_force() {
        let line = Line {
            speed: vec![(0.0, 300.0), (5.0, 300.0), (5.0, 200.0), (9.0, 200.0)],
            ..Line::default()
        };
        assert_eq!(line.speed_at(-1.0), None);
        assert_eq!(line.speed_at(2.0), Some(300.0));
        assert_eq!(line.speed_at(5.0), Some(200.0));
        assert_eq!(line.speed_at(50.0), Some(200.0));
    }

    #[test]
    fn backhitch_staircase_runs_from_start_to_last_sample() {
        let line = Line {
            backhitches: vec![(2.0, 1), (5.0, 3)],
            t_last: Some(8.0),
            ..Line::default()
        };
        assert_eq!(
            line.backhitch_staircase(),
            vec![
                (0.0, 0.0),
                (2.0, 0.0),
                (2.0, 1.0),
                (5.0, 1.0),
                (5.0, 3.0),
                (8.0, 3.0)
            ]
        );
    }

    #[test]
    fn stage_fill_is_cleaned_sorted_and_stretches_the_time_axis() {
        let at = |t, bytes, share| StageSample { t, bytes, share };
        let fill = StageFill {
            samples: vec![
                at(2.0, 3_000_000, 0.75),
                at(f64::NAN, 9_000_000, 1.0),
                at(1.0, 1_000_000, 0.25),
                at(30.0, 0, 0.0),
            ],
        };
        let p = Prepared::from_job(&JobSeries::default(), Some(&fill));
        let s = p.stage.as_ref().unwrap();
        assert_eq!(s.fill, vec![(1.0, 25.0), (2.0, 75.0), (30.0, 0.0)]);
        assert_eq!(s.peak, Some(at(2.0, 3_000_000, 0.75)));
        assert_eq!(s.size, Some(4_000_000));
        assert_eq!(p.t_end, 30.0);
        assert_eq!(StageFill::default().size(), None);
    }

    #[test]
    fn empty_job_has_usable_axes() {
        let p = Prepared::from_job(&JobSeries::default(), None);
        assert!(!p.any_samples);
        assert!(p.stage.is_none());
        assert!(p.t_end > 0.0 && p.throughput_top > 0.0 && p.speed_top > 0.0);
    }
}
