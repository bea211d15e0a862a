//! Test-only shared library that kills whatever process loads it: an ELF
//! initialiser (`.init_array`, run by the dynamic loader inside `dlopen`,
//! before any Stoa code can look at the library) calls `abort()`. The host
//! must survive it: the load probe dies instead, and the file is refused.

/// Runs when the library is loaded.
#[cfg(not(test))]
extern "C" fn abort_on_load() {
    std::process::abort();
}

/// The initialiser entry the dynamic loader calls.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static ABORT_ON_LOAD: extern "C" fn() = abort_on_load;
