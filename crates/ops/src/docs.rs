//! The documents of the wire and of `--json` (`tapeloom_proto`), made from the
//! reports of the engine and the drives. The protocol owns its documents; each is
//! filled here, so that a change of an engine's report changes no document
//! unless a conversion here changes with it.

use tapeloom_device::{DriveHealth, DriveStats};
use tapeloom_engine::{BackupReport, CopyReport, DespoolOrder, DriveReport, VerifyReport};
use tapeloom_proto::backup::{BackedUp, Compression, Drive, SetFigures, StageWaits, Stream};
use tapeloom_proto::copy::{Copied, DriveFigures};
use tapeloom_proto::fmt::{mb_per_s, PathError};
use tapeloom_proto::health::{CartridgeHealth, VolumeStatistics};
use tapeloom_proto::verify::{BadBlock, Verified};

/// The document of backup report `r`; `drive_compression` is `--drive-compression`
/// (on or off).
pub fn backed_up(r: &BackupReport, drive_compression: String) -> BackedUp {
    BackedUp {
        job_id: r.job_id,
        status: r.status.as_str(),
        set: SetFigures {
            set: r.set.set.clone(),
            level: r.set.level.name(),
            base_job: r.set.base.as_ref().map(|b| b.id),
            promoted: r.set.promoted.clone(),
            unchanged: r.unchanged,
            meta_only: r.meta_only,
            deleted: r.deleted,
            source_bytes_read: r.source_bytes_read,
            source_files_opened: r.source_files_opened,
        },
        files: r.files,
        bytes: r.bytes,
        seconds: r.seconds,
        mb_per_s: mb_per_s(r.bytes, r.seconds),
        data_seconds: r.data_seconds,
        data_mb_per_s: mb_per_s(r.bytes, r.data_seconds),
        cpu_seconds: r.cpu_seconds,
        cpu_seconds_per_gb: r
            .cpu_seconds
            .filter(|_| r.bytes > 0)
            .map(|c| c / (r.bytes as f64 / 1e9)),
        blocks: r.blocks,
        volumes: r.volumes.clone(),
        extents: r.extents,
        filemarks: r.filemarks,
        max_concurrency: r.max_concurrency,
        streams: r
            .streams
            .iter()
            .map(|s| Stream {
                name: s.name.clone(),
                bytes: s.bytes,
                files: s.files,
                seconds: s.seconds,
                mb_per_s: mb_per_s(s.bytes, s.seconds),
                drive: s.drive.unwrap_or(0),
                spool_mb_per_s: s.spool.map(|(b, secs)| mb_per_s(b, secs)),
                spool_seconds: s.spool.map(|(_, secs)| secs),
            })
            .collect(),
        drives: r.drives.iter().map(drive).collect(),
        compression: Compression {
            software: if r.software_compression {
                "zstd"
            } else {
                "none"
            },
            drive: drive_compression,
            raw_bytes: r.compression_raw_bytes,
            stored_bytes: r.compression_stored_bytes,
            ratio: r.compression_raw_bytes as f64 / r.compression_stored_bytes.max(1) as f64,
            compressed_blocks: r.compressed_blocks.0,
            stored_as_is_blocks: r.compressed_blocks.1,
        },
        via: if r.staged { "stage" } else { "direct" },
        despool: r.despool.map(|d| match d {
            DespoolOrder::Whole => "whole",
            DespoolOrder::Early => "early",
        }),
        stage_waits: r.staged.then_some(StageWaits {
            count: r.stage_waits.0,
            seconds: r.stage_waits.1,
        }),
        errors: PathError::list(&r.errors),
        copy: None,
        copy_error: None,
    }
}

/// The tape's time-weighted mean speed step over its top one, when it moved.
fn speed_share(s: &DriveStats) -> Option<f64> {
    let top = s.speed_steps_mb_s.last().copied()?;
    let moving: f64 = s.seconds_at_step.iter().sum();
    if moving <= 0.0 || top <= 0.0 {
        return None;
    }
    let weighted: f64 = s
        .speed_steps_mb_s
        .iter()
        .zip(&s.seconds_at_step)
        .map(|(v, t)| v * t)
        .sum();
    Some(weighted / moving / top)
}

/// The document of one drive of a backup.
fn drive(r: &DriveReport) -> Drive {
    let mut d = Drive {
        drive: r.drive.unwrap_or(0),
        bytes: r.bytes,
        mb_per_s: mb_per_s(r.bytes, r.seconds),
        volumes: r.volumes.clone(),
        streams: r.streams.clone(),
        max_concurrency: r.max_concurrency,
        filemarks: r.filemarks,
        utilization: None,
        backhitches: None,
        stops_after_data: None,
        compression_ratio: None,
        modeled_seconds: None,
        writer_waits: r.writer_waits,
        writer_wait_seconds: r.writer_wait_seconds,
        reader_waits: r.reader_waits,
        reader_wait_seconds: r.reader_wait_seconds,
        drive_compression: r.drive_compressed,
        tape_alerts: tape_alerts(&r.health),
        cartridges: cartridges(&r.health),
        despool_mb_per_s: r.despool.as_ref().map(|x| mb_per_s(x.bytes, x.seconds)),
        despool_max_mb_per_s: r
            .despool
            .as_ref()
            .and_then(|x| x.max_bytes_per_s)
            .map(|b| b / 1e6),
        despool_seconds: r.despool.as_ref().map(|x| x.seconds),
        streaming_speed_share: None,
        data_span_ns: r.data_span_ns.map(|(a, b)| [a, b]),
        data_span_mb_per_s: r
            .data_span_ns
            .filter(|(a, b)| b > a)
            .map(|(a, b)| r.data_bytes as f64 / ((b - a) as f64 / 1e9) / 1e6),
        model_mb_per_s: None,
    };
    if let Some(s) = &r.drive_stats {
        let secs = (s.streaming_seconds + s.stopped_seconds).max(1e-9);
        let ratio = s.compression_ratio();
        let top = s.speed_steps_mb_s.last().copied().unwrap_or(0.0) * ratio;
        let rate = s.host_bytes as f64 / secs / 1e6;
        let streaming = r.backhitches.unwrap_or(s.backhitches);
        d.utilization = (top > 0.0).then(|| (rate / top).min(1.0));
        d.model_mb_per_s = (top > 0.0).then_some(top);
        d.backhitches = Some(streaming);
        d.stops_after_data = Some(s.backhitches.saturating_sub(streaming));
        d.compression_ratio = Some(ratio);
        d.modeled_seconds = Some(s.modeled_seconds);
        d.streaming_speed_share = speed_share(s);
    }
    d
}

/// The document of copy report `r`.
pub fn copied(r: &CopyReport) -> Copied {
    let figures = |f: &tapeloom_engine::DriveFigures| DriveFigures {
        bytes: f.bytes,
        streaming_seconds: f.streaming_seconds,
        stopped_seconds: f.stopped_seconds,
        backhitches: f.backhitches,
        backhitches_while_data: f.backhitches_while_data,
        mb_per_s: f.mb_per_s,
        top_mb_per_s: f.top_mb_per_s,
    };
    Copied {
        job_id: r.job_id,
        copy_no: r.copy_no,
        pool: r.pool.clone(),
        blocks: r.blocks,
        filemarks: r.filemarks,
        bytes: r.bytes,
        segments: r.segments,
        cartridges: r.cartridges.clone(),
        seconds: r.seconds,
        drives: r.drives,
        spool_peak_bytes: r.spool_peak_bytes,
        read_drive: r.read_drive.as_ref().map(figures),
        write_drive: r.write_drive.as_ref().map(figures),
    }
}

/// The document of what the engine's verify of job `job_id` found.
pub fn verified(job_id: i64, r: VerifyReport) -> Verified {
    Verified {
        job_id,
        ok: r.ok,
        blocks_checked: r.blocks_checked,
        bad_blocks: (r.bad_blocks.into_iter())
            .map(|(volume, block)| BadBlock { volume, block })
            .collect(),
        files_checked: r.files_checked,
        files_affected: r.files_affected,
        files_missing: r.files_missing,
        bytes_read_from_tape: r.bytes_read_from_tape,
        seconds: r.seconds,
    }
}

/// What a drive said about each cartridge at the end of its mount.
pub fn cartridges(health: &[(String, DriveHealth)]) -> Vec<CartridgeHealth> {
    (health.iter())
        .map(|(barcode, h)| CartridgeHealth {
            barcode: barcode.clone(),
            tape_alerts: h.tape_alerts.clone(),
            volume_statistics: h.volume_statistics.clone().map(volume_statistics),
        })
        .collect()
}

/// The TapeAlert flags a drive raised during a job, over all its mounts, each once;
/// none when the drive has no TapeAlert page.
pub fn tape_alerts(health: &[(String, DriveHealth)]) -> Option<Vec<String>> {
    let mut all: Option<Vec<String>> = None;
    for (_, h) in health {
        if let Some(flags) = &h.tape_alerts {
            let all = all.get_or_insert_with(Vec::new);
            for f in flags {
                if !all.contains(f) {
                    all.push(f.clone());
                }
            }
        }
    }
    all
}

/// The document of a drive's volume statistics page.
pub fn volume_statistics(v: tapeloom_device::VolumeStatistics) -> VolumeStatistics {
    VolumeStatistics {
        mounts: v.mounts,
        datasets_written: v.datasets_written,
        recovered_write_errors: v.recovered_write_errors,
        unrecovered_write_errors: v.unrecovered_write_errors,
        datasets_read: v.datasets_read,
        recovered_read_errors: v.recovered_read_errors,
        unrecovered_read_errors: v.unrecovered_read_errors,
        last_mount_mb_written: v.last_mount_mb_written,
        last_mount_mb_read: v.last_mount_mb_read,
        lifetime_mb_written: v.lifetime_mb_written,
        lifetime_mb_read: v.lifetime_mb_read,
        last_load_write_compression_ratio: v.last_load_write_compression_ratio,
        native_capacity_mb: v.native_capacity_mb,
        used_native_capacity_mb: v.used_native_capacity_mb,
        volume_serial: v.volume_serial,
        write_protected: v.write_protected,
        worm: v.worm,
        beginning_of_medium_passes: v.beginning_of_medium_passes,
        middle_of_medium_passes: v.middle_of_medium_passes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_statistics_page_keeps_every_counter_and_its_name() {
        let page = tapeloom_device::VolumeStatistics {
            mounts: Some(1),
            datasets_written: Some(2),
            recovered_write_errors: Some(3),
            unrecovered_write_errors: Some(4),
            datasets_read: Some(5),
            recovered_read_errors: Some(6),
            unrecovered_read_errors: Some(7),
            last_mount_mb_written: Some(8),
            last_mount_mb_read: Some(9),
            lifetime_mb_written: Some(10),
            lifetime_mb_read: Some(11),
            last_load_write_compression_ratio: Some(1.5),
            native_capacity_mb: Some(12),
            used_native_capacity_mb: Some(13),
            volume_serial: Some("S1".into()),
            write_protected: Some(true),
            worm: Some(false),
            beginning_of_medium_passes: Some(14),
            middle_of_medium_passes: Some(15),
        };
        let doc = serde_json::to_value(volume_statistics(page.clone())).unwrap();
        assert_eq!(doc, serde_json::to_value(&page).unwrap());
        assert_eq!(doc.as_object().map(|o| o.len()), Some(19));
        // Counters the drive left out are left out of the document too.
        let none = volume_statistics(tapeloom_device::VolumeStatistics::default());
        assert_eq!(serde_json::to_string(&none).unwrap(), "{}");
    }

    #[test]
    fn a_copy_reads_as_the_engine_reported_it() {
        let figures = |bytes| tapeloom_engine::DriveFigures {
            bytes,
            streaming_seconds: 2.5,
            stopped_seconds: 0.5,
            backhitches: 3,
            backhitches_while_data: Some(1),
            mb_per_s: 40.0,
            top_mb_per_s: None,
        };
        let r = CopyReport {
            job_id: 7,
            copy_no: 2,
            pool: "offsite".into(),
            blocks: 100,
            filemarks: 1,
            bytes: 6_553_600,
            segments: 2,
            cartridges: vec!["C1".into(), "C2".into()],
            seconds: 3.25,
            drives: (0, 1),
            spool_peak_bytes: None,
            read_drive: Some(figures(10)),
            write_drive: Some(figures(20)),
        };
        let doc = serde_json::to_string(&copied(&r)).unwrap();
        assert_eq!(doc, serde_json::to_string(&r).unwrap());
        assert!(doc.contains("\"drives\":[0,1]"), "{doc}");
    }

    #[test]
    fn tape_alerts_are_each_named_once_and_none_without_a_page() {
        let mount = |flags: Option<&[&str]>| {
            let tape_alerts = flags.map(|f| f.iter().map(|s| s.to_string()).collect());
            let h = DriveHealth {
                tape_alerts,
                volume_statistics: None,
            };
            ("L1".to_string(), h)
        };
        assert_eq!(tape_alerts(&[mount(None), mount(None)]), None);
        let both = [
            mount(Some(&["14h Clean now"])),
            mount(None),
            mount(Some(&["14h Clean now", "03h Hard error"])),
        ];
        let want = vec!["14h Clean now".to_string(), "03h Hard error".to_string()];
        assert_eq!(tape_alerts(&both), Some(want));
    }
}
