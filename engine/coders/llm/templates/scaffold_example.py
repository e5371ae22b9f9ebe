# the imports your design needs


def features(X):
    ...  # X: numpy float32 array (n, SIZE, SIZE, 3), already loaded and resized; return the model's input for them


def train(X, y, skin_tone):
    ...  # X: features() of the training images; return the fitted model (with predict_proba, or a torch nn.Module)
