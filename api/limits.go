package api

// CodeTooManyRequests answers 429: the caller's address failed authentication too
// often; the Retry-After header says when to try again.
const CodeTooManyRequests = "TooManyRequests"
