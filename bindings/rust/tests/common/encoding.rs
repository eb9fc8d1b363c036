//! Hex and strict unpadded base64url (RFC 4648 section 5), as
//! docs/PROTOCOL.md section 1 defines them, for tests that take payloads
//! apart and put them back together; and the base-32 of degradation codes
//! (section 10.2).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex of either case; None if it is not hex.
pub fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 == 1 || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// Base64url without padding.
pub fn base64url_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Strict base64url without padding: no character outside the alphabet,
/// no length of 1 modulo 4, no non-zero unused bits.
pub fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let values: Vec<u32> = text
        .bytes()
        .map(|c| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32))
        .collect::<Option<_>>()?;
    if values.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(values.len() * 3 / 4);
    for chunk in values.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, v)| n | (v << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let count = chunk.len() - 1;
        // The bits below the last whole byte must be zero.
        let unused = match count {
            1 => n & 0xFFFF,
            2 => n & 0xFF,
            _ => 0,
        };
        if unused != 0 {
            return None;
        }
        out.extend_from_slice(&bytes[..count]);
    }
    Some(out)
}

/// Upper-case base-32 (RFC 4648 section 6) letters to bytes, for a
/// degradation code's 24 letters (120 bits: no padding, no unused bits);
/// None for a letter outside the alphabet or a partial byte left over.
pub fn base32_decode(letters: &str) -> Option<Vec<u8>> {
    const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut acc, mut bits, mut out) = (0u32, 0, Vec::new());
    for c in letters.bytes() {
        acc = (acc << 5 | BASE32.iter().position(|&a| a == c)? as u32) & 0xFFFF;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    (bits == 0).then_some(out)
}
