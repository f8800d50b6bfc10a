"""What an `mr` submission must satisfy before anything reaches GitLab: the policy and its
rules (paths, contents, texts), the violations they report and the bytes an item stores."""
