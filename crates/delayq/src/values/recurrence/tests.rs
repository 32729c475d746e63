//! Recurrence rules against hand-worked calendars: intervals, cron in time zones across
//! daylight-saving changes, and which missed ticks fire.

use super::*;

/// An RFC 3339 timestamp as epoch milliseconds, computed by chrono alone so expected values
/// do not depend on the code under test.
fn ms(rfc3339: &str) -> u64 {
    let dt = DateTime::parse_from_rfc3339(rfc3339).expect("valid");
    u64::try_from(dt.timestamp_millis()).expect("valid")
}

fn cron(expr: &str, tz: &str) -> Recurrence {
    Recurrence::cron(expr, tz).expect("valid")
}

fn every(secs: u64, anchor_ms: u64) -> Recurrence {
    Recurrence::interval(Duration::from_secs(secs), anchor_ms).expect("valid")
}

/// Ticks in (start, end], found backward from `end`.
fn backward(rec: &Recurrence, start: u64, end: u64) -> Vec<u64> {
    let mut ticks: Vec<u64> = Walk::at_or_before(rec, end)
        .take_while(|&t| t > start)
        .take(10_000)
        .collect();
    ticks.reverse();
    ticks
}

/// Ticks in (start, end], found forward from `start`.
fn forward(rec: &Recurrence, start: u64, end: u64) -> Vec<u64> {
    Walk::after(rec, start)
        .take_while(|&t| t <= end)
        .take(10_000)
        .collect()
}

#[test]
fn berlin_0230_spring_forward_moves_to_end_of_gap() {
    let rec = cron("0 30 2 * * *", "Europe/Berlin");
    let got = rec.upcoming(ms("2026-03-27T12:00:00Z"), 3);
    assert_eq!(
        got,
        vec![
            ms("2026-03-28T02:30:00+01:00"),
            // 02:30 does not exist on 03-29; croner fires a fixed-time job at the first
            // instant after the gap: 03:00 CEST.
            ms("2026-03-29T03:00:00+02:00"),
            ms("2026-03-30T02:30:00+02:00"),
        ]
    );
    assert_eq!(got[0], ms("2026-03-28T01:30:00Z"));
    assert_eq!(got[1], ms("2026-03-29T01:00:00Z"));
    assert_eq!(got[2], ms("2026-03-30T00:30:00Z"));
}

#[test]
fn berlin_0230_fall_back_fires_once_on_first_pass() {
    let rec = cron("0 30 2 * * *", "Europe/Berlin");
    let got = rec.upcoming(ms("2026-10-23T12:00:00Z"), 3);
    assert_eq!(
        got,
        vec![
            ms("2026-10-24T00:30:00Z"),
            ms("2026-10-25T00:30:00Z"), // 02:30 CEST; 02:30 CET (01:30Z) does not fire
            ms("2026-10-26T01:30:00Z"),
        ]
    );
    assert_eq!(got[1], ms("2026-10-25T02:30:00+02:00"));
    // Starting between the two passes must not produce the second one.
    assert_eq!(
        rec.next_after(ms("2026-10-25T00:45:00Z")),
        Some(ms("2026-10-26T01:30:00Z"))
    );
    assert_eq!(
        rec.next_after(ms("2026-10-25T01:15:00Z")),
        Some(ms("2026-10-26T01:30:00Z"))
    );
    assert_eq!(
        backward(&rec, ms("2026-10-24T12:00:00Z"), ms("2026-10-25T12:00:00Z")),
        vec![ms("2026-10-25T00:30:00Z")]
    );
}

#[test]
fn berlin_0900_across_both_changes() {
    let rec = cron("0 0 9 * * *", "Europe/Berlin");
    assert_eq!(
        rec.upcoming(ms("2026-03-27T12:00:00Z"), 2),
        vec![ms("2026-03-28T08:00:00Z"), ms("2026-03-29T07:00:00Z")]
    );
    assert_eq!(
        rec.upcoming(ms("2026-10-23T12:00:00Z"), 2),
        vec![ms("2026-10-24T07:00:00Z"), ms("2026-10-25T08:00:00Z")]
    );
}

#[test]
fn wildcard_schedule_skips_gap_and_repeats_overlap() {
    let rec = cron("0 */30 * * * *", "Europe/Berlin");
    assert_eq!(
        forward(&rec, ms("2026-03-29T00:15:00Z"), ms("2026-03-29T01:45:00Z")),
        vec![
            ms("2026-03-29T00:30:00Z"), // 01:30 CET
            ms("2026-03-29T01:00:00Z"), // 03:00 CEST; 02:00 and 02:30 do not exist
            ms("2026-03-29T01:30:00Z"),
        ]
    );
    assert_eq!(
        forward(&rec, ms("2026-10-24T23:45:00Z"), ms("2026-10-25T01:45:00Z")),
        vec![
            ms("2026-10-25T00:00:00Z"), // 02:00 CEST
            ms("2026-10-25T00:30:00Z"), // 02:30 CEST
            ms("2026-10-25T01:00:00Z"), // 02:00 CET
            ms("2026-10-25T01:30:00Z"), // 02:30 CET
        ]
    );
}

/// ticks_to_fire walks backward while upcoming walks forward; both must see the same ticks,
/// DST changes included, or a scheduler would fire different ticks than it lists.
#[test]
fn backward_and_forward_agree_across_dst() {
    let windows = [
        (
            "Europe/Berlin",
            "2026-03-28T00:00:00Z",
            "2026-03-30T12:00:00Z",
        ),
        (
            "Europe/Berlin",
            "2026-10-24T00:00:00Z",
            "2026-10-26T12:00:00Z",
        ),
        (
            "America/New_York",
            "2026-03-07T00:00:00Z",
            "2026-03-09T12:00:00Z",
        ),
        (
            "America/New_York",
            "2026-10-31T00:00:00Z",
            "2026-11-02T12:00:00Z",
        ),
        (
            "Australia/Sydney",
            "2026-04-03T12:00:00Z",
            "2026-04-06T00:00:00Z",
        ),
        (
            "Australia/Sydney",
            "2026-10-02T12:00:00Z",
            "2026-10-05T00:00:00Z",
        ),
    ];
    let exprs = [
        "0 30 2 * * *",
        "0 0 3 * * *",
        "0 0 9 * * *",
        "0 */30 * * * *",
        "0 0 * * * *",
        "0 15 1-3 * * *",
        "30 59 1 * * *",
        "*/20 * 2 * * *",
    ];
    for (tz, start, end) in windows {
        for expr in exprs {
            let rec = cron(expr, tz);
            let (start, end) = (ms(start), ms(end));
            let fwd = forward(&rec, start, end);
            assert!(!fwd.is_empty(), "{expr} in {tz}");
            assert_eq!(fwd, backward(&rec, start, end), "{expr} in {tz}");
        }
    }
}

#[test]
fn seconds_field_every_five_seconds() {
    let rec = cron("*/5 * * * * *", "UTC");
    let start = ms("2026-01-01T00:00:03.250Z");
    let got = rec.upcoming(start, 4);
    assert_eq!(
        got,
        vec![
            ms("2026-01-01T00:00:05Z"),
            ms("2026-01-01T00:00:10Z"),
            ms("2026-01-01T00:00:15Z"),
            ms("2026-01-01T00:00:20Z"),
        ]
    );
    assert!(got.iter().all(|t| t % 5_000 == 0));
    assert!(got.windows(2).all(|w| w[1] - w[0] == 5_000));
    // Strictly after: a tick equal to after_ms is not returned, sub-second parts respected.
    assert_eq!(
        rec.next_after(ms("2026-01-01T00:00:05Z")),
        Some(ms("2026-01-01T00:00:10Z"))
    );
    assert_eq!(
        rec.next_after(ms("2026-01-01T00:00:04.999Z")),
        Some(ms("2026-01-01T00:00:05Z"))
    );
}

#[test]
fn seven_field_year_expression_is_accepted() {
    let rec = cron("0 0 12 1 1 * 2030", "UTC");
    assert_eq!(rec.next_after(0), Some(ms("2030-01-01T12:00:00Z")));
    assert_eq!(rec.next_after(ms("2030-01-01T12:00:00Z")), None);
}

/// Issue 50, item 10: a classic 5-field crontab line (and croner's nicknames) is accepted,
/// firing at second 0, and kept as written.
#[test]
fn a_five_field_crontab_line_fires_at_second_zero_and_is_kept_as_written() {
    let rec = cron("30 2 * * *", "UTC");
    assert_eq!(
        rec.next_after(ms("2030-01-01T00:00:00Z")),
        Some(ms("2030-01-01T02:30:00Z"))
    );
    assert_eq!(rec.as_cron(), Some(("30 2 * * *", "UTC")));
    let weekdays = cron("0 9 * * MON-FRI", "Europe/Berlin");
    // Friday 2030-01-04 at 09:00 in Berlin (UTC+1), then Monday the 7th.
    assert_eq!(
        weekdays.next_after(ms("2030-01-04T07:00:00Z")),
        Some(ms("2030-01-04T08:00:00Z"))
    );
    assert_eq!(
        weekdays.next_after(ms("2030-01-04T08:00:00Z")),
        Some(ms("2030-01-07T08:00:00Z"))
    );
    let daily = cron("@daily", "UTC");
    assert_eq!(
        daily.next_after(ms("2030-01-01T00:00:00Z")),
        Some(ms("2030-01-02T00:00:00Z"))
    );
}

#[test]
fn invalid_definitions_are_rejected() {
    let err = Recurrence::cron("0 30 2 * * *", "Mars/Olympus")
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("Mars/Olympus") && err.contains("time zone"),
        "{err}"
    );
    for garbage in [
        "",
        "   ",
        "hello world",
        "a b c d e f",
        "a b c d e",
        "61 * * * *",
        "61 * * * * *",
        "* * * * * * * *",
    ] {
        let err = Recurrence::cron(garbage, "UTC")
            .expect_err("refused")
            .to_string();
        assert!(!err.is_empty());
    }
    for bad in [
        Duration::ZERO,
        Duration::from_millis(500),
        Duration::from_millis(999),
        Duration::from_secs(400 * 86_400),
        Duration::from_secs(366 * 86_400) + Duration::from_millis(1),
        Duration::from_micros(1_500_500),
        Duration::MAX,
    ] {
        let err = Recurrence::interval(bad, 0)
            .expect_err("refused")
            .to_string();
        assert!(err.contains("interval"), "{err}");
    }
    assert!(Recurrence::interval(Duration::from_secs(1), 0).is_ok());
    assert!(Recurrence::interval(Duration::from_secs(366 * 86_400), 0).is_ok());
    assert!(Recurrence::cron("@daily", "UTC").is_ok());
}

#[test]
fn interval_grid_starts_at_anchor() {
    let rec = Recurrence::interval(Duration::from_secs(2), 1000).expect("valid");
    assert_eq!(rec.next_after(1000), Some(3000));
    assert_eq!(rec.next_after(2999), Some(3000));
    assert_eq!(rec.next_after(3000), Some(5000));
    assert_eq!(rec.next_after(0), Some(1000));
    assert_eq!(rec.next_after(999), Some(1000));
    assert_eq!(interval_tick_at_or_before(2000, 1000, 4999), Some(3000));
    assert_eq!(interval_tick_at_or_before(2000, 1000, 999), None);
}

const T: u64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn downtime(policy: MissedTicks, now: u64, grace: u64) -> Vec<u64> {
    ticks_to_fire(&every(1, 0), policy, Some(T), 0, now, grace)
}

#[test]
fn policies_after_downtime() {
    let s = |k: u64| T + k * 1000;
    let now = T + 10_300;
    assert_eq!(downtime(MissedTicks::Skip, now, 500), vec![s(10)]);
    assert_eq!(downtime(MissedTicks::Once, now, 500), vec![s(9), s(10)]);
    assert_eq!(
        downtime(MissedTicks::All { max: 3 }, now, 500),
        vec![s(7), s(8), s(9), s(10)]
    );
    assert_eq!(
        downtime(MissedTicks::All { max: 100 }, now, 500),
        (1..=10).map(s).collect::<Vec<_>>()
    );
    assert_eq!(downtime(MissedTicks::All { max: 0 }, now, 500), vec![s(10)]);

    // No on-time tick: T+10 is 900 ms old with a 100 ms grace.
    let now = T + 10_900;
    assert_eq!(downtime(MissedTicks::Skip, now, 100), Vec::<u64>::new());
    assert_eq!(downtime(MissedTicks::Once, now, 100), vec![s(10)]);
    assert_eq!(
        downtime(MissedTicks::All { max: 2 }, now, 100),
        vec![s(9), s(10)]
    );
}

#[test]
fn ticks_to_fire_edges() {
    let rec = every(1, 0);
    // A tick equal to now is due, even with no grace.
    assert_eq!(
        ticks_to_fire(&rec, MissedTicks::Skip, Some(T), 0, T + 1000, 0),
        vec![T + 1000]
    );
    // Ticks at or before the last fired one never come back.
    assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T, 0).is_empty());
    assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T + 999, 0).is_empty());
    assert!(ticks_to_fire(&rec, MissedTicks::Once, Some(T), 0, T - 5000, 0).is_empty());
    // Never fired: creation time is the starting point, and a tick at creation does not count.
    assert_eq!(
        ticks_to_fire(&rec, MissedTicks::All { max: 10 }, None, T, T + 2500, 0),
        vec![T + 1000, T + 2000]
    );
    // Grace larger than now saturates: everything is on time.
    assert_eq!(
        ticks_to_fire(&rec, MissedTicks::Skip, None, 0, 3000, u64::MAX),
        vec![1000, 2000, 3000]
    );
    // A huge grace is bounded: the latest MAX_TICKS_PER_CALL on-time ticks.
    let got = ticks_to_fire(&rec, MissedTicks::All { max: 5 }, None, 0, T, u64::MAX);
    assert_eq!(got.len(), MAX_TICKS_PER_CALL);
    assert_eq!(got.last(), Some(&T));
    assert!(got.windows(2).all(|w| w[1] - w[0] == 1000));
}

#[test]
fn huge_gaps_stay_bounded() {
    // Interval: 1 s ticks, ten years down.
    let rec = every(1, 0);
    let now = T + 10 * 365 * 86_400_000 + 250;
    let got = ticks_to_fire(&rec, MissedTicks::All { max: 3 }, Some(T), 0, now, 500);
    let last = now - 250;
    assert_eq!(got, vec![last - 3000, last - 2000, last - 1000, last]);
    let got = ticks_to_fire(
        &rec,
        MissedTicks::All { max: u32::MAX },
        Some(T),
        0,
        now,
        500,
    );
    assert_eq!(got.len(), MAX_TICKS_PER_CALL);
    assert_eq!(got.last(), Some(&last));

    // Cron: per-second schedule, 30 days down (2.6 million candidates).
    let rec = cron("* * * * * *", "Europe/Berlin");
    let now = ms("2026-01-31T00:00:00.250Z");
    let last_fired = ms("2026-01-01T00:00:00Z");
    let s = |k: u64| ms("2026-01-31T00:00:00Z") - k * 1000;
    assert_eq!(
        ticks_to_fire(&rec, MissedTicks::Once, Some(last_fired), 0, now, 500),
        vec![s(1), s(0)]
    );
    assert_eq!(
        ticks_to_fire(
            &rec,
            MissedTicks::All { max: 5 },
            Some(last_fired),
            0,
            now,
            500
        ),
        vec![s(5), s(4), s(3), s(2), s(1), s(0)]
    );
    assert_eq!(
        ticks_to_fire(&rec, MissedTicks::Skip, Some(last_fired), 0, now, 500),
        vec![s(0)]
    );
    let got = ticks_to_fire(
        &rec,
        MissedTicks::All { max: u32::MAX },
        Some(last_fired),
        0,
        now,
        500,
    );
    assert_eq!(got.len(), MAX_TICKS_PER_CALL);
    assert_eq!(got.last(), Some(&s(0)));
    assert!(got.windows(2).all(|w| w[1] - w[0] == 1000));
}

#[test]
fn never_firing_cron_has_no_ticks() {
    let rec = cron("0 0 0 30 2 *", "UTC");
    assert_eq!(rec.next_after(0), None);
    assert_eq!(rec.next_after(ms("2026-01-01T00:00:00Z")), None);
    assert!(rec.upcoming(0, 5).is_empty());
    assert!(ticks_to_fire(
        &rec,
        MissedTicks::Once,
        None,
        0,
        ms("2026-01-01T00:00:00Z"),
        0
    )
    .is_empty());
}

#[test]
fn upcoming_returns_n_ascending() {
    let rec = cron("0 0 9 * * MON-FRI", "Europe/Berlin");
    let got = rec.upcoming(ms("2026-01-01T00:00:00Z"), 10);
    assert_eq!(got.len(), 10);
    assert!(got.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(got[0], ms("2026-01-01T09:00:00+01:00")); // a Thursday
    assert_eq!(got[2], ms("2026-01-05T09:00:00+01:00")); // the weekend is skipped

    let rec = every(60, 500);
    assert_eq!(rec.upcoming(500, 3), vec![60_500, 120_500, 180_500]);
    assert!(rec.upcoming(500, 0).is_empty());
    assert_eq!(rec.upcoming(0, usize::MAX).len(), MAX_TICKS_PER_CALL);
}

#[test]
fn extreme_inputs_do_not_panic() {
    let recs = [
        cron("* * * * * *", "UTC"),
        cron("0 30 2 * * *", "Pacific/Kiritimati"),
        cron("0 0 0 29 2 *", "America/Los_Angeles"),
        every(1, 0),
        every(366 * 86_400, u64::MAX),
        every(1, MAX_TICK_MS),
    ];
    let instants = [
        0,
        1,
        999,
        MAX_TICK_MS - 1,
        MAX_TICK_MS,
        MAX_TICK_MS + 1,
        u64::MAX,
    ];
    for rec in &recs {
        for &a in &instants {
            if let Some(t) = rec.next_after(a) {
                assert!(t > a && t <= MAX_TICK_MS);
            }
            let up = rec.upcoming(a, 3);
            assert!(up.windows(2).all(|w| w[0] < w[1]));
            // Fewer `now` values than `after` values: each cron call here may run the full
            // 4096 searches, and these few cover the edges.
            for b in [0, 999, MAX_TICK_MS + 1, u64::MAX] {
                for policy in [
                    MissedTicks::Skip,
                    MissedTicks::Once,
                    MissedTicks::All { max: u32::MAX },
                ] {
                    for grace in [0, 1000, u64::MAX] {
                        let got = ticks_to_fire(rec, policy, Some(a), a, b, grace);
                        assert!(got.len() <= MAX_TICKS_PER_CALL);
                        assert!(got.windows(2).all(|w| w[0] < w[1]));
                        assert!(got.iter().all(|&t| t > a && t <= b));
                    }
                }
            }
        }
    }
    // An anchor past the last representable tick has no ticks at all.
    assert_eq!(every(1, u64::MAX).next_after(0), None);
    assert_eq!(every(1, MAX_TICK_MS).next_after(0), Some(MAX_TICK_MS));
    // Croner stops searching at the end of year 5000.
    let every_second = cron("* * * * * *", "UTC");
    assert_eq!(
        every_second.next_after(ms("5000-06-01T00:00:00Z")),
        Some(ms("5000-06-01T00:00:01Z"))
    );
    assert_eq!(every_second.next_after(ms("5000-12-31T23:59:59Z")), None);
    assert_eq!(every_second.next_after(ms("5001-01-01T00:00:00Z")), None);
    assert_eq!(
        ticks_to_fire(&every_second, MissedTicks::Once, None, 0, u64::MAX, 0),
        vec![ms("5000-12-31T23:59:59Z")]
    );
}

/// Issue 50, item 11: a schedule is shown as written, not as its parsed pattern (its
/// `Debug` was about 17 KB of tables).
#[test]
fn a_recurrence_shows_as_written() {
    let weekdays = cron("0 9 * * MON-FRI", "Europe/Berlin");
    assert_eq!(
        weekdays.to_string(),
        r#"cron "0 9 * * MON-FRI" in Europe/Berlin"#
    );
    let debug = format!("{weekdays:?}");
    assert!(debug.len() < 100, "{debug}");
    assert!(debug.contains("0 9 * * MON-FRI"), "{debug}");
    let shown = |ms: u64| {
        Recurrence::interval(Duration::from_millis(ms), 0)
            .expect("interval")
            .to_string()
    };
    assert_eq!(shown(30_000), "every 30s");
    assert_eq!(shown(5_400_000), "every 90m");
    assert_eq!(shown(86_400_000), "every 1d");
    assert_eq!(shown(1_500), "every 1500ms");
}
