//! A file's review never takes the run down: a panic in it is caught and becomes a note.
//!
//! The first review installs a panic hook that wraps the one in place (the CLI's prints
//! `leasehold: internal error`): on a thread inside [`catch`] it records the message for the
//! note instead of printing, so a caught panic leaves stderr clean; everywhere else it calls
//! the previous hook unchanged.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let mut msg = message(info.payload());
                if let Some(at) = info.location() {
                    msg = format!("{msg} at {}:{}", at.file(), at.line());
                }
                CAUGHT.with(|c| *c.borrow_mut() = Some(msg));
            } else {
                previous(info);
            }
        }));
    });
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs `f`; a panic in it comes back as its message (with where it happened), unprinted.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let was = CATCHING.with(|c| c.replace(true));
    let out = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(was));
    out.map_err(|payload| {
        CAUGHT.with(|c| c.borrow_mut().take()).unwrap_or_else(|| message(&*payload))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        let e = catch(|| -> u8 { panic!("boom {}", 1) }).unwrap_err();
        assert!(e.starts_with("boom 1 at ") && e.contains("guard.rs"), "{e}");
        assert!(!CATCHING.with(Cell::get));
    }
}
