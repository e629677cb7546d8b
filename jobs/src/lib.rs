//! Durable timers.
