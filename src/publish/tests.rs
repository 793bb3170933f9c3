//! Tests of the publish protocol.
