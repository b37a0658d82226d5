-- wrk script of bench/ab.sh with USERS > 1: each request sends the next of several users' tokens,
-- in turn. Arguments after `--`: TOKENS_FILE (one TokenGate access token per line) PATH.
function init(args)
    tokens = {}
    for line in io.lines(args[1]) do tokens[#tokens + 1] = "Bearer " .. line end
    path = args[2]
    sent = 0
end

function request()
    sent = sent + 1
    return wrk.format("GET", path, { ["Authorization"] = tokens[(sent % #tokens) + 1] })
end
