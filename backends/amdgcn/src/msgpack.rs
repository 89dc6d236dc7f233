//! A MessagePack reader, enough for the AMDGPU metadata note (code object v3 and later store the
//! kernel descriptors' metadata as one MessagePack map).

/// A decoded MessagePack value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    /// The value under string key `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(m) => m.iter().find(|(k, _)| matches!(k, Value::Str(s) if s == key)).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Decodes one value from the start of `bytes`; errors say at which byte.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let mut r = Reader { b: bytes, at: 0 };
    r.value(0)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end =
            self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| format!("MessagePack ends inside a value at byte {}", self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &x| (a << 8) | x as u64))
    }

    fn value(&mut self, depth: u32) -> Result<Value, String> {
        if depth > 64 {
            return Err(format!("MessagePack nested more than 64 deep at byte {}", self.at));
        }
        let at = self.at;
        let t = self.take(1)?[0];
        let v = match t {
            0x00..=0x7f => Value::Int(t as i64),
            0x80..=0x8f => self.map((t & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((t & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.str((t & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.uint(1 << (t - 0xc4))? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xca => Value::Float(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => {
                let u = self.uint(1 << (t - 0xcc))?;
                Value::Int(i64::try_from(u).map_err(|_| format!("MessagePack integer {u} at byte {at} exceeds i64"))?)
            }
            0xd0..=0xd3 => {
                let n = 1usize << (t - 0xd0);
                let u = self.uint(n)?;
                let shift = 64 - 8 * n as u32;
                Value::Int(((u << shift) as i64) >> shift)
            }
            0xd9..=0xdb => {
                let n = self.uint(1 << (t - 0xd9))? as usize;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.uint(if t == 0xdc { 2 } else { 4 })? as usize;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.uint(if t == 0xde { 2 } else { 4 })? as usize;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::Int(t as i8 as i64),
            _ => return Err(format!("unsupported MessagePack type byte {t:#04x} at byte {at}")),
        };
        Ok(v)
    }

    fn str(&mut self, n: usize) -> Result<Value, String> {
        let at = self.at;
        let s = self.take(n)?;
        Ok(Value::Str(String::from_utf8(s.to_vec()).map_err(|_| format!("MessagePack string at byte {at} is not UTF-8"))?))
    }

    fn array(&mut self, n: usize, depth: u32) -> Result<Value, String> {
        // Every element takes at least a byte: a corrupt count cannot make us allocate much.
        let mut a = Vec::with_capacity(n.min(self.b.len() - self.at));
        for _ in 0..n {
            a.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(a))
    }

    fn map(&mut self, n: usize, depth: u32) -> Result<Value, String> {
        let mut m = Vec::with_capacity(n.min(self.b.len() - self.at));
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            m.push((k, v));
        }
        Ok(Value::Map(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_formats_the_metadata_uses() {
        // {"a": [1, -3, 300, "xy"], "b": true, "c": -200}
        let bytes = [0x83, 0xa1, b'a', 0x94, 0x01, 0xfd, 0xcd, 0x01, 0x2c, 0xa2, b'x', b'y', 0xa1, b'b', 0xc3, 0xa1, b'c', 0xd1, 0xff, 0x38];
        let v = decode(&bytes).unwrap();
        let a = v.get("a").unwrap().as_array().unwrap();
        assert_eq!(a[0], Value::Int(1));
        assert_eq!(a[1], Value::Int(-3));
        assert_eq!(a[2], Value::Int(300));
        assert_eq!(a[3].as_str(), Some("xy"));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
        assert_eq!(v.get("c").and_then(Value::as_int), Some(-200));
    }

    #[test]
    fn truncated_input_is_an_error() {
        let e = decode(&[0x92, 0x01]).unwrap_err();
        assert!(e.contains("ends inside"), "{e}");
        assert!(decode(&[0xc1]).unwrap_err().contains("0xc1"));
    }
}
