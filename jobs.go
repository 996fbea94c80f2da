package mcptask

// DefaultJobPrefix prefixes the names of the job tools (see
// [Server.AddJobTools]) when none is chosen: job_start, job_status, ...
const DefaultJobPrefix = "job_"
