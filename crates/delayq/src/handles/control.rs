//! Writing a queue's settings: pause, resume and [`Setting`]s go to the control hash of
//! every partition (`control.lua`), one call each, all at once.

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::partitions::{join_all, Layout};
use crate::store::scripts::SCRIPTS;
use crate::values::error::{Error, Result};
use crate::values::extension::ENCRYPTION_FORMAT;
use crate::values::settings::Setting;

/// Pauses (`true`) or resumes the queue.
pub(crate) async fn set_paused(core: &QueueCore, paused: bool) -> Result<()> {
    let value = if paused { "1" } else { "" };
    let layout = core.layout().await?;
    control(core, &layout, &[("paused", value.to_owned())]).await
}

/// [`Queue::configure`](crate::Queue::configure).
pub(crate) async fn configure(core: &QueueCore, settings: &[Setting]) -> Result<()> {
    // Checked before the layout is read, which records one for a queue not used yet: a
    // refused setting must not create the queue.
    for setting in settings {
        setting.fields(1)?;
    }
    if settings.contains(&Setting::Encryption(true)) {
        crate::handles::sealed::keyring(core)?;
    }
    let layout = core.layout().await?;
    let parts = layout.count() as u16;
    let mut fields = Vec::new();
    for setting in settings {
        fields.extend(setting.fields(parts)?);
    }
    if settings.contains(&Setting::Encryption(true)) {
        for keys in layout.parts() {
            let found = core.admit_at_least(keys, ENCRYPTION_FORMAT).await?;
            if found < ENCRYPTION_FORMAT {
                return Err(Error::FormatTooOld {
                    feature: "encrypted messages",
                    found,
                    needed: ENCRYPTION_FORMAT,
                });
            }
        }
    }
    let result = control(core, &layout, &fields).await;
    if settings.iter().any(|s| matches!(s, Setting::Encryption(_))) {
        // This process's sends follow the change at once, not a lease later.
        for keys in layout.parts() {
            core.forget_reading(keys);
        }
    }
    result
}

/// Writes `fields` (a value of '' clears one) to the control hash of every partition
/// (control.lua), all at once.
async fn control(
    core: &QueueCore,
    layout: &Layout,
    fields: &[(&'static str, String)],
) -> Result<()> {
    let calls: Vec<_> = layout
        .parts()
        .iter()
        .map(|keys| {
            let mut inv = invocation(keys, &SCRIPTS.control);
            for (name, value) in fields {
                inv.arg(*name).arg(value);
            }
            inv
        })
        .collect();
    for reply in join_all(calls.iter().map(|inv| core.invoke(inv))).await {
        reply?;
    }
    Ok(())
}
