"""The model: values that check themselves, and the pure mechanisms they own.

The hash (`hashing`), the weighted pick (`weights`), the ring, the cookie and its seal (`cookie`, `persistent`), the
slot table (`assignment`); what a split says (`splitspec`, unchecked) and the compiled split that checks it
(`compiled`); a Gateway's route table (`routes`, with its rules' `matches`, `filters` and `tls`), a generation
(`generation`) and what a replica can serve (`capabilities`); a status condition (`condition`); under all of them
`rules`, `regex`, `host`, `headervalue`, `limits`, `errors` and `vocabulary`. Imports nothing of the core outside this
package.
"""
