"""The `trunk` type's executors: `process` and `record` (`process_and_record`), and the
modules only they use: the head's one pipeline (`build`) and its outbound events
(`announce`)."""
