//! The script's reply, read strictly: anything but the three answers the
//! script gives is a backend error, never a panic or a guess.

use std::time::Duration;

use redis::Value;
use steadfast::rate::{BackendError, Decision};

/// The decision in `reply`: `[1, 0]` admitted, `[0, wait_ns]` refused for
/// `wait_ns` (more than zero), `[0, -1]` never.
pub(crate) fn decision(reply: &Value) -> Result<Decision, BackendError> {
    let garbled = || BackendError::new(format!("redis answered {reply:?}, not a GCRA decision"));
    let Value::Array(items) = reply else {
        return Err(garbled());
    };
    match items.as_slice() {
        [Value::Int(1), Value::Int(0)] => Ok(Decision::Admit),
        [Value::Int(0), Value::Int(-1)] => Ok(Decision::Refuse { retry_after: None }),
        [Value::Int(0), Value::Int(wait)] if *wait > 0 => Ok(Decision::Refuse {
            retry_after: Some(Duration::from_nanos(wait.unsigned_abs())),
        }),
        _ => Err(garbled()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn array(items: &[i64]) -> Value {
        Value::Array(items.iter().map(|&i| Value::Int(i)).collect())
    }

    #[test]
    fn the_three_answers_are_read() {
        assert_eq!(decision(&array(&[1, 0])).ok(), Some(Decision::Admit));
        assert_eq!(
            decision(&array(&[0, 1_500])).ok(),
            Some(Decision::Refuse {
                retry_after: Some(Duration::from_nanos(1_500))
            })
        );
        assert_eq!(
            decision(&array(&[0, -1])).ok(),
            Some(Decision::Refuse { retry_after: None })
        );
    }

    #[test]
    fn anything_else_is_an_error_that_shows_it() {
        for reply in [
            array(&[0, 0]),
            array(&[0, -7]),
            array(&[1, 5]),
            array(&[2, 0]),
            array(&[1]),
            array(&[1, 0, 0]),
            Value::Int(1),
            Value::Nil,
            Value::Okay,
            Value::BulkString(b"1 0".to_vec()),
            Value::Array(vec![Value::BulkString(b"1".to_vec()), Value::Int(0)]),
        ] {
            let err = decision(&reply).unwrap_err();
            assert!(err.to_string().contains("not a GCRA decision"), "{err}");
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<i64>().prop_map(Value::Int),
            Just(Value::Nil),
            Just(Value::Okay),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::BulkString),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Value::Array)
        })
    }

    proptest! {
        /// Any reply at all is read without a panic, and only the script's
        /// three shapes are read as decisions.
        #[test]
        fn any_reply_is_read_without_a_panic(reply in value()) {
            if let Ok(d) = decision(&reply) {
                let Value::Array(items) = &reply else { panic!("{reply:?}") };
                prop_assert_eq!(items.len(), 2);
                match d {
                    Decision::Admit => prop_assert_eq!(&items[..], &[Value::Int(1), Value::Int(0)][..]),
                    Decision::Refuse { .. } => prop_assert_eq!(&items[0], &Value::Int(0)),
                }
            }
        }
    }
}
