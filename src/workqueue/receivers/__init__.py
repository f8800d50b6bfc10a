"""What receives GitLab events besides the HTTP route: the SQS consumer (`sqs`), and what
both receivers share: which project a delivery names as GitLab knows it (`projects`) and
how many GitLab look-ups deliveries may cost (`lookup_budget`)."""
