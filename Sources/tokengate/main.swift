import TGApp

print(tokenGateVersion)
