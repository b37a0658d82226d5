-- wrk script of bench/dpop.sh: every request sends the DPoP-bound token with a proof of its own.
-- Arguments after `--`: PROOFS_FILE (one proof per line) THREADS TOKEN PATH. Each thread takes
-- every THREADS-th line, so no proof is sent twice; past the last one, requests reuse it (and
-- TokenGate answers 401: wrk counts them as non-2xx, and bench/dpop.sh reports it).
local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("id", counter)
end

function init(args)
    local threads = tonumber(args[2])
    proofs = {}
    local index = 0
    for line in io.lines(args[1]) do
        if index % threads == id - 1 then proofs[#proofs + 1] = line end
        index = index + 1
    end
    token = "DPoP " .. args[3]
    path = args[4]
    sent = 0
end

function request()
    sent = sent + 1
    local proof = proofs[sent] or proofs[#proofs]
    return wrk.format("GET", path, { ["Authorization"] = token, ["DPoP"] = proof })
end
