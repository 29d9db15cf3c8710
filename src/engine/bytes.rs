//! Byte searches eight bytes a step. wasm32's `usize` is four bytes, so `memchr`'s portable path
//! (what a build without the `simd128` target feature runs) reads four at a time, and its set-up
//! for alignment costs more than the search on an SSE line of a hundred bytes; wasm loads a `u64`
//! from any address in one instruction.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that equals `needle`, and maybe of bytes above such a byte
/// (a borrow runs up from a match): the lowest flag is always exact.
#[inline(always)]
fn flags(x: u64, needle: u8) -> u64 {
    let t = x ^ (ONES * u64::from(needle));
    t.wrapping_sub(ONES) & !t & HIGH
}

/// The first eight bytes of `hay` from `i`, as one little-endian word.
#[inline(always)]
fn word(hay: &[u8], i: usize) -> Option<u64> {
    // Byte by byte: under opt-level "z" a copy into an array is a call per word.
    let &[b0, b1, b2, b3, b4, b5, b6, b7] = hay.get(i..i + 8)? else { return None };
    Some(u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]))
}

/// The index of the first `a` in `hay`.
pub fn find(a: u8, hay: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(x) = word(hay, i) {
        let f = flags(x, a);
        if f != 0 {
            return Some(i + (f.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay.get(i..)?.iter().position(|&c| c == a).map(|p| i + p)
}

/// The index of the first `a` or `b` in `hay`.
pub fn find2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(x) = word(hay, i) {
        // Each needle's lowest flag is exact, so the lowest of both is the first of either.
        let f = flags(x, a) | flags(x, b);
        if f != 0 {
            return Some(i + (f.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay.get(i..)?.iter().position(|&c| c == a || c == b).map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain scan: every length to 40 with the needles (and bytes one off them, which
    /// borrow) at every place, and 20,000 pseudo-random haystacks over a small alphabet.
    #[test]
    fn the_same_as_a_plain_scan() {
        let check = |hay: &[u8]| {
            for (a, b) in [(b'\n', b'\r'), (b'\\', b'\\'), (0, 0x80), (0xff, 0x01)] {
                assert_eq!(find(a, hay), hay.iter().position(|&c| c == a), "{hay:?} {a}");
                assert_eq!(find2(a, b, hay), hay.iter().position(|&c| c == a || c == b), "{hay:?} {a} {b}");
            }
        };
        for len in 0..40 {
            for at in 0..len {
                for (fill, put) in
                    [(b'x', b'\n'), (b'\x0b', b'\r'), (b'\x0e', b'\n'), (0x81, 0), (0, 0xff), (b']', b'\\')]
                {
                    let mut hay = vec![fill; len];
                    hay[at] = put;
                    check(&hay);
                    if at + 3 < len {
                        hay[at + 3] = b'\r';
                        check(&hay);
                    }
                }
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            let len = (seed >> 40) as usize % 70;
            let hay: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    [b'\n', b'\r', b'\\', b'\x0b', b'\x0c', b'\x0e', 0, 0x80, 0x81, 0xff, b'a'][(seed % 11) as usize]
                })
                .collect();
            check(&hay);
        }
    }
}
