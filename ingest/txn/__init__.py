"""(filled in as the layer grows)"""
