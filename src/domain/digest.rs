//! The one SHA-1 of the console: the digest EVALSHA names a script by, and the checksum a
//! migration is recorded with. One function, so the two can never disagree on the encoding.

/// The lowercase hex SHA-1 of `text`, as Redis's SCRIPT LOAD returns it.
pub fn sha1_hex(text: &str) -> String {
    sha1_smol::Sha1::from(text).digest().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_the_digest_redis_names_scripts_by() {
        assert_eq!(
            sha1_hex("return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
        let body = "return redis.call('GET', KEYS[1])";
        assert_eq!(sha1_hex(body), redis::Script::new(body).get_hash());
    }
}
