"""ASTRA-sim's own input formats, read and validated as ASTRA-sim 518bd51 reads them: the system file
(`system`), the analytical network file (`analytical`) and the remote-memory file (`remote_memory`),
the JSON ones through one reader (`json_file`). Both the importer, which takes a study's files as they
are, and the embedded backend, which runs them, read them here."""
