// test/cli/demangle_rs.rs: a Rust workload whose hot function lives in
// nested modules (issue 16: demangled names).
//   demangle_rs SECONDS    prints "ready", then spins in
//   demangle_rs::shop::detail::spin until SECONDS pass
use std::time::{Duration, Instant};

mod shop {
    pub mod detail {
        #[inline(never)]
        pub fn spin(seed: u64, n: u64) -> u64 {
            let mut t = seed;
            for i in 0..n {
                t = t.wrapping_mul(31).wrapping_add(i);
            }
            t
        }
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    println!("ready");
    let mut x = 0u64;
    while Instant::now() < end {
        x = shop::detail::spin(x, 200000);
    }
    if x == 42 {
        println!("{}", x);
    }
}
