//! A minimal JSON reader for the protocol test vectors (the crate has no
//! dependencies): objects, arrays, strings with every escape, integers,
//! true, false and null.  Numbers with a fraction or an exponent are
//! refused: the vectors have none.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Array(Vec<Json>),
    /// Members in file order.
    Object(Vec<(String, Json)>),
}

/// Where and why a text is not JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl Json {
    pub fn parse(text: &str) -> Result<Json, ParseError> {
        let mut parser = Parser { bytes: text.as_bytes(), at: 0, depth: 0 };
        let value = parser.value()?;
        parser.whitespace();
        if parser.at != parser.bytes.len() {
            return Err(parser.error("trailing characters after the value"));
        }
        Ok(value)
    }

    /// The member `key` of an object, if any.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The member `key` of an object; panics if it is missing.
    #[track_caller]
    pub fn field(&self, key: &str) -> &Json {
        self.get(key).unwrap_or_else(|| panic!("no member {key:?} in {}", self.summary()))
    }

    #[track_caller]
    pub fn as_str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("expected a string, got {}", other.summary()),
        }
    }

    #[track_caller]
    pub fn as_i64(&self) -> i64 {
        match self {
            Json::Int(n) => *n,
            other => panic!("expected an integer, got {}", other.summary()),
        }
    }

    #[track_caller]
    pub fn as_array(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            other => panic!("expected an array, got {}", other.summary()),
        }
    }

    /// The string member `key`.
    #[track_caller]
    pub fn text(&self, key: &str) -> &str {
        self.field(key).as_str()
    }

    /// The lowercase-hex member `key`, decoded.
    #[track_caller]
    pub fn hex(&self, key: &str) -> Vec<u8> {
        let text = self.text(key);
        super::encoding::hex_decode(text).unwrap_or_else(|| panic!("member {key:?} is not hex: {text:?}"))
    }

    /// The hex member `key` as exactly N bytes.
    #[track_caller]
    pub fn hex_array<const N: usize>(&self, key: &str) -> [u8; N] {
        let bytes = self.hex(key);
        <[u8; N]>::try_from(bytes.as_slice())
            .unwrap_or_else(|_| panic!("member {key:?} is {} bytes, not {N}", bytes.len()))
    }

    /// The integer member `key`.
    #[track_caller]
    pub fn int(&self, key: &str) -> i64 {
        self.field(key).as_i64()
    }

    /// The array member `key`.
    #[track_caller]
    pub fn array(&self, key: &str) -> &[Json] {
        self.field(key).as_array()
    }

    /// A short description for failure messages.
    pub fn summary(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::Int(n) => n.to_string(),
            Json::Str(s) => format!("{s:?}"),
            Json::Array(items) => format!("an array of {}", items.len()),
            Json::Object(members) => {
                let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
                format!("an object with {keys:?}")
            }
        }
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError { offset: self.at, message: message.into() }
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(format!("expected {:?}", byte as char)))
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, ParseError> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self) -> Result<Json, ParseError> {
        self.whitespace();
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'{') => self.nested(Parser::object),
            Some(b'[') => self.nested(Parser::array),
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(other) => Err(self.error(format!("unexpected {:?}", other as char))),
        }
    }

    fn nested(&mut self, body: fn(&mut Self) -> Result<Json, ParseError>) -> Result<Json, ParseError> {
        self.depth += 1;
        if self.depth > 64 {
            return Err(self.error("nested too deeply"));
        }
        let value = body(self);
        self.depth -= 1;
        value
    }

    fn object(&mut self) -> Result<Json, ParseError> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a member name"));
            }
            let key = self.string()?;
            if members.iter().any(|(k, _)| *k == key) {
                return Err(self.error(format!("duplicate member {key:?}")));
            }
            self.whitespace();
            self.expect(b':')?;
            let value = self.value()?;
            members.push((key, value));
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, ParseError> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        if self.at == digits {
            return Err(self.error("a number needs digits"));
        }
        if self.bytes[digits] == b'0' && self.at - digits > 1 {
            return Err(self.error("a number has a leading zero"));
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return Err(self.error("only integers are supported"));
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).unwrap();
        text.parse().map(Json::Int).map_err(|_| ParseError { offset: start, message: "integer out of range".into() })
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self.bytes.get(self.at..self.at + 4).ok_or_else(|| self.error("truncated \\u escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.error("bad \\u escape"))?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error("bad \\u escape"));
        }
        self.at += 4;
        Ok(u32::from_str_radix(text, 16).unwrap())
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.expect(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(byte) = self.peek() else { return Err(self.error("unterminated string")) };
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let Some(escape) = self.peek() else { return Err(self.error("unterminated escape")) };
                    self.at += 1;
                    let c = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let first = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&first) {
                                if !self.bytes[self.at..].starts_with(b"\\u") {
                                    return Err(self.error("a high surrogate without its low surrogate"));
                                }
                                self.at += 2;
                                let second = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&second) {
                                    return Err(self.error("a high surrogate without its low surrogate"));
                                }
                                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                            } else {
                                first
                            };
                            char::from_u32(code).ok_or_else(|| self.error("a lone low surrogate"))?
                        }
                        other => return Err(self.error(format!("unknown escape \\{}", other as char))),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                0x00..=0x1f => return Err(self.error("a control character in a string")),
                other => out.push(other),
            }
        }
        // The input is a &str, and escapes add whole characters.
        String::from_utf8(out).map_err(|_| self.error("a string that is not UTF-8"))
    }
}
